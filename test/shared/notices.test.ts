// The pure parts of the notices seam: the table both ends keep (a change once, a repeat never, a
// snapshot as the changes it makes), and the daemon's board feeding the broker's registry over an
// in-memory mux, where a second channel's snapshot tells handlers what vanished meanwhile; and the
// host's asks on the same streams: answered by the broker that declared the topic, null at once
// when none did or the stream closes first.
import { Duplex } from "node:stream";
import { describe, expect, it } from "vitest";
import type { Notice } from "../../src/shared/agent-api.js";
import { Mux } from "../../src/shared/mux.js";
import { NoticeTable } from "../../src/shared/notice-table.js";
import { noticeBoard } from "../../src/remote-agent/notice-board.js";
import { NoticeRegistry } from "../../src/broker/process/notices.js";

describe("NoticeTable", () => {
  it("returns a notice once when it changes what is held, never a repeat", () => {
    const t = new NoticeTable();
    expect(t.apply({ kind: "ports", key: "w1", ports: [1] })).toEqual({ kind: "ports", key: "w1", ports: [1] });
    expect(t.apply({ kind: "ports", key: "w1", ports: [1] })).toBeNull();
    expect(t.apply({ kind: "ports", key: "w1", ports: [1, 2] })).toEqual({ kind: "ports", key: "w1", ports: [1, 2] });
    expect(t.apply({ kind: "work", key: "w1", head: "x" })).not.toBeNull();
    expect(t.size).toBe(2);
    expect(t.apply({ kind: "ports", key: "w1", gone: true })).toEqual({ kind: "ports", key: "w1", gone: true });
    expect(t.apply({ kind: "ports", key: "w1", gone: true })).toBeNull();
    expect(t.ofKind("ports")).toEqual([]);
    expect(t.get("work", "w1")).toEqual({ kind: "work", key: "w1", head: "x" });
  });

  it("a snapshot is the changes it makes: vanished keys as gone, unchanged ones not repeated", () => {
    const t = new NoticeTable();
    t.apply({ kind: "ports", key: "a", ports: [1] });
    t.apply({ kind: "ports", key: "b", ports: [2] });
    t.apply({ kind: "ports", key: "c", ports: [3] });
    const changes = t.replace([
      { kind: "ports", key: "b", ports: [2] },
      { kind: "ports", key: "c", ports: [4] },
      { kind: "ports", key: "d", ports: [5] },
    ]);
    expect(changes).toEqual([
      { kind: "ports", key: "a", gone: true },
      { kind: "ports", key: "c", ports: [4] },
      { kind: "ports", key: "d", ports: [5] },
    ]);
    expect(t.clear().map((n) => [n.key, n.gone])).toEqual([
      ["b", true],
      ["c", true],
      ["d", true],
    ]);
    expect(t.size).toBe(0);
  });
});

/** Two connected in-memory duplexes. */
function duplexPair(): [Duplex, Duplex] {
  const ends: Duplex[] = [];
  const make = (i: number) =>
    new Duplex({
      read() {},
      write(chunk: Buffer, _enc, cb) {
        const p = ends[1 - i]!;
        if (!p.destroyed) p.push(chunk);
        cb();
      },
      destroy(err, cb) {
        const p = ends[1 - i]!;
        if (!p.destroyed) setImmediate(() => p.destroy());
        cb(err);
      },
    });
  ends.push(make(0), make(1));
  return [ends[0]!, ends[1]!];
}

/** A channel from a broker-side mux to a daemon-side one whose notices streams the board serves. */
function channel(): Mux {
  const [a, b] = duplexPair();
  const server = new Mux(b, { role: "server", build: "t" });
  server.on("stream", (s) => noticeBoard.subscribe(s, (s.header as { answers?: string[] }).answers ?? []));
  return new Mux(a, { role: "client", build: "t" });
}

const settle = () => new Promise((r) => setTimeout(r, 20));

/** A ports notice's entry for host port `port`. */
const at = (port: number) => ({ port, pid: 1, argv0: "node", since: 0 });

describe("notice board to registry", () => {
  it("a snapshot on open, then changes; a newer channel's snapshot reports what vanished meanwhile", async () => {
    noticeBoard.publish("ports", "w1", { ports: [at(3000)] });
    const reg = new NoticeRegistry();
    const seen: Notice[] = [];
    reg.onNotice(
      "ports",
      (n) => seen.push(n),
      (n) => ({ seenBy: `view of ${n.key}` }),
    );
    expect(() => reg.onNotice("ports", () => undefined)).toThrow(/already/);
    const first = channel();
    reg.attach(first.open({ kind: "notices" }));
    await settle();
    expect(reg.up).toBe(true);
    expect(seen).toEqual([{ ports: [at(3000)], kind: "ports", key: "w1" }]);
    noticeBoard.publish("ports", "w2", { ports: [at(5173)] });
    noticeBoard.publish("ports", "w2", { ports: [at(5173)] });
    noticeBoard.publish("test", "x", { a: 1 });
    await settle();
    expect(seen.map((n) => n.key)).toEqual(["w1", "w2"]);
    // A declared kind with no handler here is held (and keeps the broker up) all the same.
    expect(reg.live).toBe(3);
    expect(reg.describe("ports", "w2")).toEqual([{ ports: [at(5173)], kind: "ports", key: "w2", seenBy: "view of w2" }]);

    // The channel is lost; meanwhile w1 goes and w2 changes. A new channel's snapshot catches up.
    first.close("link reset");
    await settle();
    expect(reg.up).toBe(false);
    expect(reg.live).toBe(3);
    noticeBoard.publish("ports", "w1", null);
    noticeBoard.publish("ports", "w2", { ports: [at(5173), at(6006)] });
    const second = channel();
    reg.attach(second.open({ kind: "notices" }));
    await settle();
    expect(seen.slice(2)).toEqual([
      { kind: "ports", key: "w1", gone: true },
      { ports: [at(5173), at(6006)], kind: "ports", key: "w2" },
    ]);
    expect(noticeBoard.subscribers).toBe(1);

    reg.reset();
    expect(seen.at(-1)).toEqual({ kind: "ports", key: "w2", gone: true });
    expect(reg.live).toBe(0);
    second.close("done");
    noticeBoard.publish("ports", "w2", null);
    noticeBoard.publish("test", "x", null);
  });

  it("takes only what the protocol declares: an unknown kind is dropped, a malformed notice is its key gone", async () => {
    const reg = new NoticeRegistry();
    const seen: Notice[] = [];
    const logs: string[] = [];
    reg.on("log", (l) => logs.push(l));
    reg.onNotice("ports", (n) => seen.push(n));
    // The daemon's board is typed: a host of another build (or a hostile one) is what sends these.
    const publish = noticeBoard.publish.bind(noticeBoard) as (kind: string, key: string, payload: Record<string, unknown> | null) => void;
    publish("ports", "w1", { ports: [at(3000)] });
    publish("other", "x", { a: 1 });
    const ch = channel();
    reg.attach(ch.open({ kind: "notices" }));
    await settle();
    expect(seen).toEqual([{ ports: [at(3000)], kind: "ports", key: "w1" }]);
    expect(reg.live).toBe(1);
    expect(reg.describe("other")).toEqual([]);
    expect(logs).toContain('notices stream: ignored a notice of unknown kind "other"');

    // A report that cannot be read takes the key's forwards away rather than keep stale ones.
    publish("ports", "w1", { ports: [{ port: "3000" }] });
    await settle();
    expect(seen.at(-1)).toEqual({ kind: "ports", key: "w1", gone: true });
    expect(reg.live).toBe(0);
    expect(logs).toContain('notices stream: ignored a malformed ports notice for "w1"');
    publish("work", "w2", { state: { head: 1 } });
    await settle();
    expect(reg.describe("work")).toEqual([]);
    expect(reg.up).toBe(true);

    ch.close("done");
    publish("ports", "w1", null);
    publish("other", "x", null);
    publish("work", "w2", null);
  });
});

describe("asks on the notices stream", () => {
  it("go to the newest broker that declared the topic and come back answered; none, or a stream lost first, is null at once", async () => {
    expect(await noticeBoard.ask("git-credential", { q: 0 }, 5000)).toBeNull();
    const reg = new NoticeRegistry();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const asked: unknown[] = [];
    reg.onAsk("git-credential", async (body) => {
      asked.push(body);
      if ((body as { q: number }).q === 2) await gate;
      return { a: (body as { q: number }).q };
    });
    expect(() => reg.onAsk("git-credential", async () => null)).toThrow(/already/);
    expect(reg.answers).toEqual(["git-credential"]);
    // A broker answering nothing is never asked.
    const silent = channel();
    new NoticeRegistry().attach(silent.open({ kind: "notices" }));
    await settle();
    expect(noticeBoard.answers("git-credential")).toBe(false);
    const first = channel();
    reg.attach(first.open({ kind: "notices", answers: reg.answers }));
    await settle();
    expect(noticeBoard.answers("git-credential")).toBe(true);
    // What the board still holds from the test before counts too; an ask in progress adds one.
    const held = reg.live;
    expect(await noticeBoard.ask("git-credential", { q: 1 }, 5000)).toEqual({ a: 1 });
    expect(reg.live).toBe(held);

    // Lost while the Paseo side works on it: the host's answer is null at once, not after the bound.
    const pending = noticeBoard.ask("git-credential", { q: 2 }, 60_000);
    await settle();
    expect(reg.live).toBe(held + 1);
    const lostAt = Date.now();
    first.close("link reset");
    expect(await pending).toBeNull();
    expect(Date.now() - lostAt).toBeLessThan(1000);
    release();
    await settle();
    expect(reg.live).toBe(held);
    expect(noticeBoard.answers("git-credential")).toBe(false);
    expect(await noticeBoard.ask("git-credential", { q: 3 }, 5000)).toBeNull();
    expect(asked).toEqual([{ q: 1 }, { q: 2 }]);

    // No answer within the bound: null.
    const second = channel();
    const slow = new NoticeRegistry();
    slow.onAsk("git-credential", () => new Promise(() => undefined));
    slow.attach(second.open({ kind: "notices", answers: slow.answers }));
    await settle();
    expect(await noticeBoard.ask("git-credential", { q: 4 }, 100)).toBeNull();
    second.close("done");
    silent.close("done");
  });
});
