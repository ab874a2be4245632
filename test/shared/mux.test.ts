// The stream multiplexer's pure logic over in-memory channels: framing at any chunking, per-stream
// credit (a stalled stream holds only its own sender back), END/RESET semantics, channel loss,
// keepalive death, bounds and malformed input (the channel closes with a log line, nothing throws).
import { randomBytes } from "node:crypto";
import { Duplex } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  MAX_MUX_PAYLOAD,
  MUX_VERSION,
  Mux,
  MuxFrame,
  STREAM_WINDOW,
  encodeMuxFrame,
  type MuxStream,
  type StreamClose,
} from "../../src/shared/mux.js";
import { StreamHeader, streamHeader } from "../../src/shared/agent-api.js";

/** Two connected in-memory duplexes; `hold` buffers a direction until released (a stalled link). */
function duplexPair(): { a: Duplex; b: Duplex; bytesAtoB: () => number } {
  let a!: Duplex;
  let b!: Duplex;
  let aToB = 0;
  const make = (peer: () => Duplex, count: (n: number) => void) =>
    new Duplex({
      read() {},
      write(chunk: Buffer, _enc, cb) {
        count(chunk.length);
        const p = peer();
        if (!p.destroyed) p.push(chunk);
        cb();
      },
      final(cb) {
        peer().push(null);
        cb();
      },
      destroy(err, cb) {
        const p = peer();
        if (!p.destroyed) setImmediate(() => p.destroy());
        cb(err);
      },
    });
  a = make(
    () => b,
    (n) => (aToB += n),
  );
  b = make(
    () => a,
    () => undefined,
  );
  return { a, b, bytesAtoB: () => aToB };
}

/** A channel end the test feeds by hand; what the mux writes is collected. */
function rawEnd(): { raw: Duplex; written: Buffer[] } {
  const written: Buffer[] = [];
  const raw = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, cb) {
      written.push(chunk);
      cb();
    },
  });
  return { raw, written };
}

function pair(keepaliveMs = 0) {
  const { a, b, bytesAtoB } = duplexPair();
  const logs: string[] = [];
  const client = new Mux(a, { role: "client", build: "c", keepaliveMs, log: (l) => logs.push(l) });
  const server = new Mux(b, { role: "server", build: "s", pid: 42, log: (l) => logs.push(l) });
  return { client, server, logs, bytesAtoB };
}

const tick = () => new Promise((r) => setImmediate(r));

function collect(s: MuxStream): { data: () => Buffer; ended: Promise<void>; closed: Promise<StreamClose> } {
  const chunks: Buffer[] = [];
  s.on("data", (d) => chunks.push(d));
  return {
    data: () => Buffer.concat(chunks),
    ended: new Promise((r) => s.once("end", () => r())),
    closed: new Promise((r) => s.once("close", r)),
  };
}

function helloFrame(role: "client" | "server", v = MUX_VERSION, keepaliveMs = 0): Buffer {
  return encodeMuxFrame(MuxFrame.Hello, 0, Buffer.from(JSON.stringify({ v, role, build: "x", keepaliveMs })));
}

afterEach(() => {
  vi.useRealTimers();
});

describe("mux", () => {
  it("exchanges HELLO and carries a stream both ways, closing in order after END from each side", async () => {
    const { client, server } = pair();
    const accepted = new Promise<MuxStream>((r) => server.on("stream", r));
    expect((await client.hello()).pid).toBe(42);
    expect((await server.hello()).role).toBe("client");
    const s = client.open({ kind: "agent" });
    const cs = collect(s);
    const t = await accepted;
    expect(t.header).toEqual({ kind: "agent" });
    const ts = collect(t);
    s.write(Buffer.from("ping"));
    s.end();
    await ts.ended;
    expect(ts.data().toString()).toBe("ping");
    t.write(Buffer.from("pong"));
    t.end();
    expect(await cs.closed).toEqual({ reason: null });
    expect(await ts.closed).toEqual({ reason: null });
    expect(cs.data().toString()).toBe("pong");
    expect(client.streamCount).toBe(0);
    expect(server.streamCount).toBe(0);
  });

  it("decodes frames split at every byte boundary", async () => {
    const { raw, written } = rawEnd();
    const m = new Mux(raw, { role: "server", build: "s" });
    const got: Buffer[] = [];
    m.on("stream", (s) => s.on("data", (d) => got.push(d)));
    const payload = randomBytes(3000);
    const bytes = Buffer.concat([
      helloFrame("client"),
      encodeMuxFrame(MuxFrame.Open, 1, Buffer.from("{}")),
      encodeMuxFrame(MuxFrame.Data, 1, payload),
      encodeMuxFrame(MuxFrame.Data, 1, Buffer.from("tail")),
    ]);
    for (let i = 0; i < bytes.length; i++) raw.push(bytes.subarray(i, i + 1));
    await tick();
    expect(Buffer.concat(got).equals(Buffer.concat([payload, Buffer.from("tail")]))).toBe(true);
    expect(m.closed).toBe(false);
    expect(written[0]!.readUInt8(0)).toBe(MuxFrame.Hello);
  });

  it("a paused receiver holds its sender at the window; other streams keep flowing; resume delivers everything exactly", async () => {
    const { client, server } = pair();
    const streams: MuxStream[] = [];
    server.on("stream", (s) => streams.push(s));
    const slow = client.open({ n: "slow" });
    const fast = client.open({ n: "fast" });
    await tick();
    const [slowT, fastT] = streams as [MuxStream, MuxStream];
    slowT.pause();
    const slowIn = collect(slowT);
    const fastIn = collect(fastT);
    const big = randomBytes(STREAM_WINDOW * 3);
    let accepted = true;
    for (let off = 0; off < big.length; off += 100_000) accepted = slow.write(big.subarray(off, off + 100_000)) && accepted;
    expect(accepted).toBe(false);
    let drained = false;
    slow.once("drain", () => (drained = true));
    for (let i = 0; i < 20; i++) await tick();
    expect(slowIn.data().length).toBe(0);
    expect(drained).toBe(false);
    // The fast stream is not stuck behind the slow one.
    const small = randomBytes(500_000);
    fast.write(small);
    fast.end();
    await fastIn.ended;
    expect(fastIn.data().equals(small)).toBe(true);
    slowT.resume();
    slow.end();
    await slowIn.ended;
    expect(slowIn.data().equals(big)).toBe(true);
    expect(drained).toBe(true);
  });

  it("never puts more than one window of a stalled stream on the channel", async () => {
    const { client, server, bytesAtoB } = pair();
    server.on("stream", (s) => s.pause());
    const s = client.open();
    await tick();
    const before = bytesAtoB();
    s.write(randomBytes(STREAM_WINDOW * 4));
    for (let i = 0; i < 20; i++) await tick();
    const sent = bytesAtoB() - before;
    expect(sent).toBeGreaterThanOrEqual(STREAM_WINDOW);
    expect(sent).toBeLessThan(STREAM_WINDOW + 64 * 1024);
  });

  it("RESET reaches the peer with its reason and message; the stream is gone on both sides", async () => {
    const { client, server } = pair();
    const accepted = new Promise<MuxStream>((r) => server.on("stream", r));
    const s = client.open();
    const t = await accepted;
    const tc = collect(t);
    const sc = collect(s);
    s.reset("client-gone", "wrapper died");
    expect(await tc.closed).toEqual({ reason: "client-gone", message: "wrapper died" });
    expect(await sc.closed).toEqual({ reason: "client-gone", message: "wrapper died" });
    expect(s.write(Buffer.from("late"))).toBe(false);
    expect(server.streamCount).toBe(0);
  });

  it("GOAWAY reaches the peer; streams already open carry on", async () => {
    const { client, server } = pair();
    const accepted = new Promise<MuxStream>((r) => server.on("stream", r));
    const s = client.open();
    const t = await accepted;
    const away = new Promise<void>((r) => client.once("goaway", () => r()));
    server.goAway();
    await away;
    const c = collect(s);
    t.write(Buffer.from("still here"));
    t.end();
    await c.ended;
    expect(c.data().toString()).toBe("still here");
    expect(client.closed).toBe(false);
  });

  it("a lost channel closes every stream with link-lost", async () => {
    const { client, server } = pair();
    server.on("stream", () => undefined);
    const closes = Array.from({ length: 5 }, () => collect(client.open()).closed);
    const why = new Promise<string>((r) => server.once("close", r));
    client.close("test cut");
    for (const c of await Promise.all(closes)) expect(c).toMatchObject({ reason: "link-lost", channel: "local" });
    expect(await why).toMatch(/closed/);
    expect(server.closeCode).toMatch(/^(peer-closed|transport-closed)$/);
    expect(() => client.open()).toThrow(/closed/);
  });

  it("carries 1000 concurrent streams, each byte-exact", async () => {
    const { client, server } = pair();
    server.on("stream", (t) => {
      // Echo, reversed per stream, so a mix-up between streams cannot pass.
      const chunks: Buffer[] = [];
      t.on("data", (d) => chunks.push(d));
      t.on("end", () => {
        t.write(Buffer.from(Buffer.concat(chunks).reverse()));
        t.end();
      });
    });
    const inputs = Array.from({ length: 1000 }, (_, i) => randomBytes(100 + ((i * 7919) % 20_000)));
    const results = await Promise.all(
      inputs.map(async (input) => {
        const s = client.open();
        const c = collect(s);
        s.write(input.subarray(0, 50));
        s.write(input.subarray(50));
        s.end();
        await c.closed;
        return c.data();
      }),
    );
    results.forEach((r, i) => expect(r.equals(Buffer.from(inputs[i]!).reverse())).toBe(true));
    expect(client.streamCount).toBe(0);
  });

  it("refuses streams beyond its bound without closing the channel", async () => {
    const { a, b } = duplexPair();
    const client = new Mux(a, { role: "client", build: "c" });
    const server = new Mux(b, { role: "server", build: "s", maxStreams: 2 });
    server.on("stream", () => undefined);
    const s = [client.open(), client.open(), client.open()].map(collect);
    expect(await s[2]!.closed).toEqual({ reason: "refused", message: "too many streams on one channel (2)" });
    expect(client.closed).toBe(false);
    expect(server.streamCount).toBe(2);
  });

  it("a typed channel refuses an OPEN whose header is not one of its declared kinds, and carries on", async () => {
    const { a, b } = duplexPair();
    const client = new Mux(a, { role: "client", build: "c" });
    const server = new Mux(b, { role: "server", build: "s", header: StreamHeader });
    const accepted: StreamHeader[] = [];
    server.on("stream", (t) => {
      accepted.push(t.header);
      t.end();
    });
    const unknown = collect(client.open({ kind: "teleport" }));
    const malformed = collect(client.open({ kind: "client-gone", token: 7 }));
    expect(await unknown.closed).toEqual({ reason: "refused", message: 'unknown or malformed stream header (kind "teleport")' });
    expect((await malformed.closed).reason).toBe("refused");
    const good = client.open(streamHeader.clientGone("a".repeat(32), 2));
    const gc = collect(good);
    good.end();
    expect((await gc.closed).reason).toBeNull();
    expect(accepted).toEqual([{ kind: "client-gone", token: "a".repeat(32), gen: 2 }]);
    expect(client.closed).toBe(false);
  });

  it("the declared headers are the bytes the kinds had before (a daemon of another build reads them)", () => {
    expect(JSON.stringify(streamHeader.agent)).toBe('{"kind":"agent"}');
    expect(JSON.stringify(streamHeader.retire)).toBe('{"kind":"retire"}');
    expect(JSON.stringify(streamHeader.notices([]))).toBe('{"kind":"notices"}');
    expect(JSON.stringify(streamHeader.notices(["git-credential"]))).toBe('{"kind":"notices","answers":["git-credential"]}');
    expect(JSON.stringify(streamHeader.clientGone("abc", 3))).toBe('{"kind":"client-gone","token":"abc","gen":3}');
  });

  it("a side that stops answering is declared dead after three keepalive intervals", async () => {
    vi.useFakeTimers();
    const { raw } = rawEnd();
    const closed: string[] = [];
    const logs: string[] = [];
    const m = new Mux(raw, { role: "client", build: "c", keepaliveMs: 1000, log: (l) => logs.push(l) });
    m.on("close", (why) => closed.push(why));
    raw.push(helloFrame("server"));
    const open = m.open();
    await vi.advanceTimersByTimeAsync(2500);
    expect(closed).toEqual([]);
    // Any byte from the peer counts as life.
    raw.push(encodeMuxFrame(MuxFrame.Pong, 0, Buffer.alloc(0)));
    await vi.advanceTimersByTimeAsync(2500);
    expect(closed).toEqual([]);
    await vi.advanceTimersByTimeAsync(2000);
    expect(closed).toEqual(["no answer from the peer for 3000 ms"]);
    expect(logs.join("\n")).toMatch(/keepalive/);
    // The cause is a code on the channel and on every stream lost with it (nothing matches the text).
    expect(m.closeCode).toBe("keepalive-timeout");
    expect(open.closeInfo).toEqual({ reason: "link-lost", message: "no answer from the peer for 3000 ms", channel: "keepalive-timeout" });
  });

  it("the server pings at the interval its client announced and answers pings", async () => {
    vi.useFakeTimers();
    const { raw, written } = rawEnd();
    new Mux(raw, { role: "server", build: "s" });
    raw.push(helloFrame("client", MUX_VERSION, 500));
    raw.push(encodeMuxFrame(MuxFrame.Ping, 0, Buffer.alloc(0)));
    await vi.advanceTimersByTimeAsync(600);
    const types = written.map((w) => w.readUInt8(0));
    expect(types).toContain(MuxFrame.Pong);
    expect(types).toContain(MuxFrame.Ping);
  });

  it.each([
    [
      "an unknown frame type",
      () => Buffer.concat([helloFrame("client"), encodeMuxFrame(99 as MuxFrame, 0, Buffer.alloc(0))]),
      /unknown frame type 99/,
    ],
    [
      "an oversized frame",
      () => Buffer.concat([helloFrame("client"), Buffer.from([MuxFrame.Data, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff])]),
      new RegExp(`exceeds ${MAX_MUX_PAYLOAD}`),
    ],
    ["data before HELLO", () => encodeMuxFrame(MuxFrame.Open, 1, Buffer.from("{}")), /first frame is not HELLO/],
    ["another mux version", () => helloFrame("client", MUX_VERSION + 1), /mux version/],
    [
      "a non-JSON OPEN header",
      () => Buffer.concat([helloFrame("client"), encodeMuxFrame(MuxFrame.Open, 1, Buffer.from("{"))]),
      /OPEN header is not a JSON object/,
    ],
    [
      "an OPEN with the server's own stream parity",
      () => Buffer.concat([helloFrame("client"), encodeMuxFrame(MuxFrame.Open, 2, Buffer.from("{}"))]),
      /wrong side/,
    ],
    ["a short CREDIT", () => Buffer.concat([helloFrame("client"), encodeMuxFrame(MuxFrame.Credit, 1, Buffer.from([1]))]), /CREDIT payload/],
    [
      "data beyond the stream's window",
      () =>
        Buffer.concat([
          helloFrame("client"),
          encodeMuxFrame(MuxFrame.Open, 1, Buffer.from("{}")),
          ...Array.from({ length: STREAM_WINDOW / MAX_MUX_PAYLOAD + 1 }, () =>
            encodeMuxFrame(MuxFrame.Data, 1, Buffer.alloc(MAX_MUX_PAYLOAD)),
          ),
        ]),
      /beyond its window/,
    ],
  ])("closes the channel with a log line on %s", async (_name, bytes, why) => {
    const { raw } = rawEnd();
    const logs: string[] = [];
    const m = new Mux(raw, { role: "server", build: "s", log: (l) => logs.push(l) });
    const streams: MuxStream[] = [];
    m.on("stream", (s) => {
      s.pause();
      streams.push(s);
    });
    const closed = new Promise<string>((r) => m.once("close", r));
    raw.push(bytes());
    expect(await closed).toMatch(why);
    expect(logs.join("\n")).toMatch(why);
    for (const s of streams) expect(s.closeInfo?.reason).toBe("link-lost");
  });
});
