// The one bounded line reader: lines split anywhere across chunks (UTF-8 included), a line in
// progress past the bound fails at once, the first-line reader leaves what follows in the stream,
// and its wait is bounded.
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { LineReadError, LineSplitter, LineTooLong, onJsonLines, readFirstLine, readJsonLine } from "../../src/shared/json-lines.js";
import { isRecord } from "../../src/shared/guards.js";

describe("json lines", () => {
  it("splits lines at any chunking, UTF-8 sequences included", () => {
    const text = Buffer.from('{"a":"é€😀"}\n\n{"b":2}\n{"c"', "utf8");
    for (let cut = 1; cut < text.length; cut++) {
      const s = new LineSplitter(1024);
      const lines = [...s.push(text.subarray(0, cut)), ...s.push(text.subarray(cut))].map((l) => l.toString("utf8"));
      expect(lines).toEqual(['{"a":"é€😀"}', "", '{"b":2}']);
      expect(s.takeRest().toString("utf8")).toBe('{"c"');
    }
  });

  it("fails a line past its bound without waiting for the newline", () => {
    const s = new LineSplitter(8);
    expect(s.push("12345678\n")).toHaveLength(1);
    expect(() => s.push("123456789")).toThrow(LineTooLong);
    expect(() => new LineSplitter(8).push("123456789\n")).toThrow(LineTooLong);
  });

  it("the first line resolves and what follows stays in the stream", async () => {
    const p = new PassThrough();
    const line = readJsonLine(p, isRecord, { maxLine: 100, timeoutMs: 5000, unshiftRest: true });
    p.write('{"ok":tr');
    p.write("ue}\nrest of the stream");
    expect(await line).toEqual({ ok: true });
    expect((p.read() as Buffer).toString("utf8")).toBe("rest of the stream");
  });

  it("a head already read counts as the start of the stream", async () => {
    const p = new PassThrough();
    const line = readFirstLine(p, { head: Buffer.from("hel"), maxLine: 100, timeoutMs: 5000 });
    p.write("lo\n");
    expect((await line).toString()).toBe("hello");
  });

  it("each failure has its reason", async () => {
    const reason = (p: Promise<unknown>) =>
      p.then(
        () => null,
        (e: unknown) => (e instanceof LineReadError ? e.reason : e),
      );
    const silent = new PassThrough();
    expect(await reason(readFirstLine(silent, { maxLine: 10, timeoutMs: 50 }))).toBe("timeout");
    const closed = new PassThrough();
    const c = reason(readFirstLine(closed, { maxLine: 10, timeoutMs: 5000 }));
    closed.end("no newline");
    expect(await c).toBe("closed");
    const long = new PassThrough();
    const l = reason(readFirstLine(long, { maxLine: 10, timeoutMs: 5000 }));
    long.write("x".repeat(11));
    expect(await l).toBe("too-long");
    const notJson = new PassThrough();
    const n = reason(readJsonLine(notJson, isRecord, { maxLine: 100, timeoutMs: 5000 }));
    notJson.write("nope\n");
    expect(await n).toBe("not-json");
    const wrong = new PassThrough();
    const w = reason(readJsonLine(wrong, isRecord, { maxLine: 100, timeoutMs: 5000 }));
    wrong.write("[1]\n");
    expect(await w).toBe("malformed");
  });

  it("a stream of lines: skips or stops on a bad line as asked", () => {
    const got: unknown[] = [];
    const stops: string[] = [];
    const p = new PassThrough();
    onJsonLines(p, { maxLine: 100, guard: isRecord, onStop: (why) => stops.push(why) }, (m) => got.push(m));
    p.emit("data", Buffer.from('{"a":1}\n\n[2]\n{"b":3}\n'));
    expect(got).toEqual([{ a: 1 }]);
    expect(stops).toEqual(["malformed"]);
    const skipped: unknown[] = [];
    const q = new PassThrough();
    onJsonLines(q, { maxLine: 100, guard: isRecord, onInvalid: "skip" }, (m) => skipped.push(m));
    q.emit("data", Buffer.from('{"a":1}\nnot json\n[2]\n{"b":3}\n'));
    expect(skipped).toEqual([{ a: 1 }, { b: 3 }]);
  });
});
