// Large or hostile input to the exec wrapper over the real sshd: memory stays bounded whatever a
// writer does, and what cannot be handled fails with one clear line.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecWorkspace, exitOf, flood } from "../support/exec.js";

const MiB = 1024 * 1024;

describe("exec under large or hostile input", () => {
  const ws = new ExecWorkspace("exec-limits");
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("fd3: 400 MB without a newline is refused at the line bound; the wrapper's memory stays bounded", async () => {
    const h = ws.start({ argv: ["/bin/true"] }, { rawEnvelope: "", keepControlOpen: true });
    const { written, maxRss } = await flood(h.control, h.child.pid!, 400 * MiB, Buffer.alloc(MiB, "a"));
    h.control.end();
    const r = await h.done;
    console.log(
      `fd3 flood: ${(written / MiB).toFixed(0)} MiB written before the wrapper stopped reading; max wrapper RSS ${(maxRss / MiB).toFixed(0)} MiB`,
    );
    expect(r.stderr.trim()).toBe("fd3 control frame exceeds 16 MiB without a newline");
    expect(r.code).toBe(2);
    expect(r.fd4).toBe("");
    expect(maxRss).toBeLessThan(150 * MiB);
  });

  // Terminal input in lines: a `sleep` never reads them, so the terminal's input queue fills and
  // everything behind it (sshd, SSH window, broker, wrapper) must hold the writer back.
  const lines = Buffer.from(("y".repeat(1023) + "\n").repeat(256));
  const pty = { kind: "pty" as const, rows: 24, cols: 80 };

  it("PTY: 500 MB offered to fd0 of a PTY `sleep` keeps the wrapper's memory bounded; the exec still answers", async () => {
    const h = ws.start({ argv: ["/bin/sleep", "600"], stdio: pty });
    await h.waitEvent("started");
    const { written, maxRss } = await flood(h.stdin, h.child.pid!, 500 * MiB, lines);
    console.log(
      `PTY stdin flood: ${(written / MiB).toFixed(0)} MiB taken by the wrapper; max wrapper RSS ${(maxRss / MiB).toFixed(0)} MiB`,
    );
    expect(maxRss).toBeLessThan(150 * MiB);
    h.sendControl({ type: "signal", protocolVersion: 1, signal: "SIGKILL" });
    expect(exitOf(await h.done)).toEqual({ code: null, signal: "SIGKILL" });
  });

  it("PTY: input a program reads keeps flowing under the same bound", async () => {
    const h = ws.start({ argv: ["/bin/sh", "-c", "head -c 4000000 >/dev/null"], env: { PATH: "/usr/bin:/bin" }, stdio: pty });
    await h.waitEvent("started");
    const { maxRss } = await flood(h.stdin, h.child.pid!, 500 * MiB, lines);
    expect(maxRss).toBeLessThan(150 * MiB);
    expect(exitOf(await h.done)).toEqual({ code: 0, signal: null });
  });
});

describe("exec under large input, connected in-process (broker: false)", () => {
  const ws = new ExecWorkspace("exec-limits-direct", { broker: false });
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("PTY: 500 MB offered to fd0 of a PTY `sleep` keeps the wrapper's memory bounded", async () => {
    const h = ws.start({ argv: ["/bin/sleep", "600"], stdio: { kind: "pty", rows: 24, cols: 80 } });
    await h.waitEvent("started");
    const { maxRss } = await flood(h.stdin, h.child.pid!, 500 * MiB, Buffer.from(("y".repeat(1023) + "\n").repeat(256)));
    expect(maxRss).toBeLessThan(150 * MiB);
    h.sendControl({ type: "signal", protocolVersion: 1, signal: "SIGKILL" });
    expect(exitOf(await h.done)).toEqual({ code: null, signal: "SIGKILL" });
  });
});
