// A hostile or broken peer of the mux (a compromised host daemon, or a broker that is not ours)
// and of an agent conversation cannot grow this side's memory without bound nor break its timers
// (pure logic over in-memory channels): a peer that sends PINGs and never reads is owed one PONG,
// not one per PING; one whose other requests earn answers it does not take is no longer read once
// they pile up; credit beyond the window is clamped; a HELLO's numbers
// are clamped (keepaliveMs 1e10 overflowed node's timer into a ping every millisecond); and
// unfinished JSON messages are bounded per conversation and for the whole agent.
import { Duplex } from "node:stream";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import {
  MAX_CONTROL_BACKLOG,
  MAX_PEER_KEEPALIVE_MS,
  MUX_VERSION,
  Mux,
  MuxFrame,
  STREAM_WINDOW,
  MAX_RESET_MESSAGE,
  encodeMuxFrame,
  sanitizeHello,
  type StreamClose,
} from "../../src/shared/mux.js";
import { FrameKind, MAX_FRAME_PAYLOAD, encodeFrame, encodeJson } from "../../src/shared/frames.js";
import { MAX_HELD_BYTES, heldBytes, serveConversation, type ConversationPort } from "../../src/remote-agent/serve-conversation.js";
import type { ConversationEnd } from "../../src/remote-agent/context.js";

const tick = () => new Promise((r) => setImmediate(r));

/** A channel end whose peer never reads: writes are never completed. `release()` lets them through. */
function unreadEnd(): { raw: Duplex; frames: () => number[]; release(): void } {
  const pending: Array<() => void> = [];
  const types: number[] = [];
  let flowing = false;
  const raw = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, cb) {
      types.push(chunk.readUInt8(0));
      if (flowing) cb();
      else pending.push(cb);
    },
  });
  return {
    raw,
    frames: () => types,
    release: () => {
      flowing = true;
      for (const cb of pending.splice(0)) cb();
    },
  };
}

function hello(role: "client" | "server", extra: Record<string, unknown> = {}): Buffer {
  return encodeMuxFrame(MuxFrame.Hello, 0, Buffer.from(JSON.stringify({ v: MUX_VERSION, role, build: "x", keepaliveMs: 0, ...extra })));
}

const PING = encodeMuxFrame(MuxFrame.Ping, 0, Buffer.alloc(0));

describe("a mux peer that sends and never reads", () => {
  it("8 MiB of PINGs: while it does not read, no PONG piles up; one goes out once it reads", async () => {
    const { raw, frames, release } = unreadEnd();
    const m = new Mux(raw, { role: "server", build: "s" });
    raw.push(hello("client"));
    // 64 KiB chunks of PINGs, as a socket delivers them, 8 MiB in all (each one owed a PONG before).
    const chunk = Buffer.concat(Array.from({ length: 7281 }, () => PING));
    for (let sent = 0; sent < 8 * 1024 * 1024; sent += chunk.length) {
      raw.push(chunk);
      await tick();
    }
    expect(raw.writableLength).toBeLessThanOrEqual(raw.writableHighWaterMark + 64 * 1024);
    expect(m.closed).toBe(false);
    release();
    await tick();
    // What fitted under the high-water mark before it stopped reading, and the one owed since.
    const pongs = frames().filter((t) => t === MuxFrame.Pong).length;
    expect(pongs).toBeGreaterThan(0);
    expect(pongs).toBeLessThanOrEqual(Math.ceil(raw.writableHighWaterMark / PING.length) + 1);
    expect(raw.writableLength).toBe(0);
  });

  it("OPENs it is refused while it never reads: its input is no longer read once the RESETs pile up, and is read again once it reads", async () => {
    const { raw, release } = unreadEnd();
    // No "stream" listener: every OPEN is answered with a RESET (not accepting streams).
    const m = new Mux(raw, { role: "server", build: "s" });
    raw.push(hello("client"));
    let id = 1;
    const opens = () => Buffer.concat(Array.from({ length: 1000 }, () => encodeMuxFrame(MuxFrame.Open, (id += 2), Buffer.from("{}"))));
    for (let i = 0; i < 200; i++) {
      raw.push(opens());
      await tick();
    }
    const bound = raw.writableHighWaterMark + 64 * 1024 + MAX_CONTROL_BACKLOG + 1000 * 100;
    expect(raw.writableLength).toBeLessThanOrEqual(bound);
    expect(raw.isPaused()).toBe(true);
    expect(raw.readableLength).toBeGreaterThan(0);
    expect(m.closed).toBe(false);
    release();
    for (let i = 0; i < 20 && raw.readableLength > 0; i++) await tick();
    expect(raw.isPaused()).toBe(false);
    expect(raw.readableLength).toBe(0);
  });

  it("credit beyond the window is clamped: a stream never has more than one window on the channel", async () => {
    const { raw, release } = unreadEnd();
    release();
    const written: Buffer[] = [];
    raw.on("data", () => undefined);
    const origWrite = raw.write.bind(raw);
    raw.write = ((chunk: Buffer, ...rest: unknown[]) => {
      written.push(chunk);
      return (origWrite as (c: Buffer, ...r: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof raw.write;
    const m = new Mux(raw, { role: "client", build: "c" });
    raw.push(hello("server"));
    await tick();
    const s = m.open({});
    // A peer that grants 4 GiB it never received anything for.
    raw.push(encodeMuxFrame(MuxFrame.Credit, s.id, Buffer.from([0xff, 0xff, 0xff, 0xff])));
    await tick();
    for (let i = 0; i < 10; i++) s.write(Buffer.alloc(1024 * 1024));
    for (let i = 0; i < 50; i++) await tick();
    const data = written.filter((w) => w.readUInt8(0) === MuxFrame.Data).reduce((n, w) => n + w.length - 9, 0);
    expect(data).toBe(STREAM_WINDOW);
  });
});

describe("a peer's fields", () => {
  it("a RESET message is cut to one line's length", async () => {
    const { raw, release } = unreadEnd();
    release();
    const m = new Mux(raw, { role: "client", build: "c" });
    raw.push(hello("server"));
    await tick();
    const s = m.open({});
    const closed = new Promise<StreamClose>((r) => s.once("close", r));
    raw.push(encodeMuxFrame(MuxFrame.Reset, s.id, Buffer.from(JSON.stringify({ reason: "error", message: "x".repeat(100_000) }))));
    expect((await closed).message).toBe("x".repeat(MAX_RESET_MESSAGE));
  });

  it("keepaliveMs 1e10 is clamped: the server does not ping every millisecond", async () => {
    const { raw, frames, release } = unreadEnd();
    release();
    const m = new Mux(raw, { role: "server", build: "s" });
    raw.push(hello("client", { keepaliveMs: 1e10 }));
    await new Promise((r) => setTimeout(r, 300));
    expect(m.peerHello?.keepaliveMs).toBe(MAX_PEER_KEEPALIVE_MS);
    expect(frames().filter((t) => t === MuxFrame.Ping)).toEqual([]);
    m.close("test over");
  });

  it("every number is clamped or dropped; a HELLO without a role is refused", () => {
    expect(sanitizeHello({ v: MUX_VERSION, role: "client", build: "b", keepaliveMs: 1 })?.keepaliveMs).toBe(100);
    expect(sanitizeHello({ v: MUX_VERSION, role: "client", build: "b", keepaliveMs: -5 })?.keepaliveMs).toBe(0);
    expect(sanitizeHello({ v: MUX_VERSION, role: "client", build: "b", keepaliveMs: "9" })?.keepaliveMs).toBe(0);
    expect(sanitizeHello({ v: MUX_VERSION, role: "client", build: "b", keepaliveMs: Infinity })?.keepaliveMs).toBe(0);
    expect(sanitizeHello({ v: MUX_VERSION, role: "server", build: "b", keepaliveMs: 0, pid: 2 ** 40 })).toEqual({
      v: MUX_VERSION,
      role: "server",
      build: "b",
      keepaliveMs: 0,
    });
    expect(sanitizeHello({ v: MUX_VERSION, role: "server", build: "b".repeat(10_000), keepaliveMs: 0, pid: 7 })).toMatchObject({
      build: "b".repeat(200),
      pid: 7,
    });
    expect(sanitizeHello({ v: MUX_VERSION, build: "b", keepaliveMs: 0 })).toBeNull();
  });
});

describe("an agent conversation's unfinished messages", () => {
  const root = suite("all").tmp("paseo-hostile-conv-");

  function conversation(): { push(b: Buffer): void; answers: Buffer[]; finished: () => boolean | null; close(how: ConversationEnd): void } {
    let onData!: (chunk: Buffer) => void;
    let onClose!: (how: ConversationEnd) => void;
    const answers: Buffer[] = [];
    let failed: boolean | null = null;
    const port: ConversationPort = {
      write: (b) => (answers.push(b), true),
      drained: () => Promise.resolve(),
      pauseInput: () => undefined,
      resumeInput: () => undefined,
      finish: (f) => (failed = f),
      onData: (l) => (onData = l),
      onClose: (l) => (onClose = l),
    };
    serveConversation(port, { agentDir: root, nodePath: process.execPath, resolveRoot: () => root });
    return { push: (b) => onData(b), answers, finished: () => failed, close: (how) => onClose(how) };
  }

  const PART = encodeFrame(FrameKind.JsonPart, Buffer.alloc(MAX_FRAME_PAYLOAD, 0x20));

  it("JSON parts that never end are bounded for the whole agent: the conversation that goes past it fails as input", () => {
    const perConversation = 50;
    const convs = [conversation(), conversation(), conversation()];
    for (const c of convs) for (let i = 0; i < perConversation && c.finished() === null; i++) c.push(PART);
    expect(convs.map((c) => c.finished())).toEqual([null, null, true]);
    expect(Buffer.concat(convs[2]!.answers).toString()).toMatch(/unfinished messages of this agent's conversations exceed/);
    expect(heldBytes()).toBeLessThanOrEqual(MAX_HELD_BYTES);
    // Conversations that go away give their share back.
    for (const c of convs) c.close("client-gone");
    expect(heldBytes()).toBe(0);
  });

  it("after its request, a conversation takes no JSON message longer than one frame", async () => {
    const c = conversation();
    // The request is taken (its op answers at once, the conversation stays open to its peer).
    c.push(encodeJson({ op: "exec.processes", root }));
    c.push(PART);
    c.push(PART);
    await tick();
    expect(Buffer.concat(c.answers).toString()).toMatch(/JSON message longer than 1048576 bytes/);
    c.close("end");
    expect(heldBytes()).toBe(0);
  });
});
