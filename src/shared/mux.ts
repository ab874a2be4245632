// Many byte streams over one byte channel: every agent conversation of a host travels between the
// Paseo-side broker and the host daemon over ONE SSH channel (or the daemon's Unix socket itself),
// so concurrency is bounded neither by sshd's MaxSessions nor by one process per conversation.
// Built-ins only: bundled into the remote agent as well.
//
// Frame: [type u8][stream u32 BE][length u32 BE][payload]. HELLO is the first frame each way;
// OPEN starts a stream (JSON header); DATA carries its bytes; CREDIT (u32) lets the peer send that
// many more bytes on the stream; END is a half-close; RESET aborts it (JSON {reason, message?});
// PING/PONG (stream 0) prove the peer is still there, because a silent link is otherwise invisible;
// GOAWAY (stream 0) asks the peer to open no more streams on this channel (the sender is about to
// exit when idle, and serves whatever the peer opened before it saw the GOAWAY).
//
// Flow control is per stream and both ways: a sender never has more than STREAM_WINDOW bytes
// unacknowledged by CREDIT, and a receiver grants credit only as its consumer takes the bytes, so
// one slow stream never stalls the others sharing the channel. The channel itself is written only
// while it does not ask for draining; streams with data and credit take turns, SEND_CHUNK at a time.
import { EventEmitter } from "node:events";
import type { Duplex } from "node:stream";
import type { Guard } from "./guards.js";

export const MUX_VERSION = 1;

export const MuxFrame = {
  Hello: 1,
  Open: 2,
  Data: 3,
  Credit: 4,
  End: 5,
  Reset: 6,
  Ping: 7,
  Pong: 8,
  GoAway: 9,
} as const;
export type MuxFrame = (typeof MuxFrame)[keyof typeof MuxFrame];

export const MUX_HEADER = 9;
/** Larger frames are malformed: the channel is closed. */
export const MAX_MUX_PAYLOAD = 1024 * 1024;
/** Bytes a sender may have in flight per stream before the receiver grants more. */
export const STREAM_WINDOW = 2 * 1024 * 1024;
/** Streams one channel may carry at once; further OPENs are reset. */
export const MAX_STREAMS = 4096;
/** DATA frames are at most this large, so streams sharing the channel take short turns. */
const SEND_CHUNK = 64 * 1024;
/** A stream's write() returns false (and `drain` follows) above this many unsent bytes. */
const STREAM_HIGH_WATER = 256 * 1024;
/** Credit is granted in batches of at least this many consumed bytes. */
const GRANT_BATCH = STREAM_WINDOW / 4;
/** Keepalive: the channel is dead after this many intervals without any byte from the peer. */
export const MISSED_PINGS = 3;
/** A peer's keepalive interval is clamped to this range (0 stays "none"): node timers overflow past 2^31 ms. */
export const MIN_PEER_KEEPALIVE_MS = 100;
export const MAX_PEER_KEEPALIVE_MS = 3_600_000;
/**
 * Unsent control bytes beyond the transport's high-water mark (and one DATA chunk) above which the
 * channel's input is no longer read. Our own DATA stops at that mark, so only control frames
 * answering the peer (PONG, CREDIT, RESET) get this far: a peer that sends and never reads is then
 * held back by its own transport instead of growing this side's memory, and a legitimate peer
 * never gets close (CREDIT is 13 bytes per 512 KiB taken).
 */
export const MAX_CONTROL_BACKLOG = 1024 * 1024;
/** Control frames queued while congested above which input is not read either (each costs a write request). */
export const MAX_CONTROL_FRAMES = 4096;
/** Longest `build` string kept from a peer's HELLO (diagnostics only). */
const MAX_HELLO_BUILD = 200;
/** Longest RESET message kept from a peer. */
export const MAX_RESET_MESSAGE = 500;

/**
 * Why a stream was reset: the client went away without ending it (its wrapper was killed), the
 * link to the peer was lost (reset locally by the mux), the peer refused or failed it.
 */
export const RESET_REASONS = ["client-gone", "link-lost", "refused", "error"] as const;
export type ResetReason = (typeof RESET_REASONS)[number];

/**
 * Why a channel closed (every stream on it closes with link-lost and this code): the peer ended
 * it, the transport closed or failed, the peer sent nothing for MISSED_PINGS keepalive intervals
 * (the link is silent, not merely idle), the peer broke the protocol, or this side closed it.
 */
export type MuxCloseCode = "peer-closed" | "transport-closed" | "transport-error" | "keepalive-timeout" | "protocol-error" | "local";

export interface MuxHello {
  v: number;
  role: "client" | "server";
  /** The sender's build (the agent hash on the daemon side). */
  build: string;
  /** The client's keepalive interval; the server pings at the same rate. 0 disables. */
  keepaliveMs: number;
  pid?: number;
}

/**
 * `header`: the one check of the peer's OPEN headers (the declaration of what may be opened on the
 * channel): an OPEN whose header fails it is refused (RESET refused) before any `stream` event.
 * Required for a typed channel; an untyped one (H unknown) takes any JSON object.
 */
export type MuxOptions<H = unknown> = MuxBaseOptions & (unknown extends H ? { header?: Guard<H> } : { header: Guard<H> });

interface MuxBaseOptions {
  role: "client" | "server";
  build: string;
  /** Client: ping interval (0: none). Server: ignored, the client's value from its HELLO is used. */
  keepaliveMs?: number;
  pid?: number;
  /** One diagnostic line (malformed input, keepalive death). */
  log?(line: string): void;
  maxStreams?: number;
}

export class MuxError extends Error {}

export interface StreamClose {
  /** Null for an orderly close (END both ways). */
  reason: ResetReason | null;
  message?: string;
  /** Set with link-lost when the stream went with its channel: why the channel closed. */
  channel?: MuxCloseCode;
}

interface MuxStreamEvents {
  data: [Buffer];
  /** The peer sent END: no more data will arrive. */
  end: [];
  /** Writes are accepted again after write() returned false. */
  drain: [];
  /** Fully closed: ended both ways, reset by either side, or the channel was lost. */
  close: [StreamClose];
}

/** What a stream needs of its mux (narrow, so that a stream's type depends only on its header's). */
interface StreamSink {
  schedule(stream: MuxStream): void;
  forget(stream: MuxStream): void;
  sendCredit(id: number, n: number): void;
  sendReset(id: number, reason: ResetReason, message?: string): void;
}

/** One logical stream: Duplex-like (write/end/pause/resume, `data`/`end`/`drain`/`close`). */
export class MuxStream<H = unknown> extends EventEmitter<MuxStreamEvents> {
  private sendCredit = STREAM_WINDOW;
  private readonly outQueue: Buffer[] = [];
  private queued = 0;
  private endQueued = false;
  private endSent = false;
  private wantDrain = false;
  private recvAllowance = STREAM_WINDOW;
  private consumedUngranted = 0;
  private readonly inQueue: Buffer[] = [];
  private paused = false;
  private remoteEnded = false;
  private endEmitted = false;
  private closedWith: StreamClose | null = null;

  constructor(
    private readonly mux: StreamSink,
    readonly id: number,
    /** The OPEN header (the opener's, checked by MuxOptions.header on the accepting side). */
    readonly header: H,
  ) {
    super();
  }

  get closed(): boolean {
    return this.closedWith !== null;
  }

  /** Why the stream closed (null while open). */
  get closeInfo(): StreamClose | null {
    return this.closedWith;
  }

  /** Whether the writer should wait for `drain` before writing more. */
  get needsDrain(): boolean {
    return this.queued > STREAM_HIGH_WATER;
  }

  /** Resolves once write() would return true again (or the stream closed). */
  drained(): Promise<void> {
    if (!this.needsDrain || this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.off("drain", done);
        this.off("close", done);
        resolve();
      };
      this.on("drain", done);
      this.on("close", done);
    });
  }

  /** Queues bytes; false when the writer should wait for `drain`. Ignored after end/close. */
  write(data: Buffer): boolean {
    if (this.closed || this.endQueued) return false;
    if (data.length > 0) {
      this.outQueue.push(data);
      this.queued += data.length;
      this.mux.schedule(this);
    }
    if (this.needsDrain) this.wantDrain = true;
    return !this.needsDrain;
  }

  /** Half-close: END is sent after every queued byte. */
  end(): void {
    if (this.closed || this.endQueued) return;
    this.endQueued = true;
    this.mux.schedule(this);
  }

  /** Aborts the stream both ways at once; queued bytes are dropped. */
  reset(reason: ResetReason, message?: string): void {
    if (this.closed) return;
    this.mux.sendReset(this.id, reason, message);
    this.finish({ reason, ...(message !== undefined ? { message } : {}) });
  }

  /** Stops delivering `data` (and granting credit): the peer is held back by its window. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    while (!this.paused && this.inQueue.length > 0) this.deliver(this.inQueue.shift()!);
    this.maybeEmitEnd();
  }

  get isPaused(): boolean {
    return this.paused;
  }

  // ---- used by Mux ----

  /** True when this stream has something it may send now. */
  sendable(): boolean {
    if (this.closed) return false;
    if (this.queued > 0) return this.sendCredit > 0;
    return this.endQueued && !this.endSent;
  }

  /** The next DATA payload (or null for END) within credit; called only when sendable(). */
  takeChunk(): Buffer | null {
    if (this.queued === 0) {
      this.endSent = true;
      return null;
    }
    const limit = Math.min(SEND_CHUNK, this.sendCredit);
    const head = this.outQueue[0]!;
    let chunk: Buffer;
    if (head.length <= limit) {
      chunk = this.outQueue.shift()!;
    } else {
      chunk = head.subarray(0, limit);
      this.outQueue[0] = head.subarray(limit);
    }
    this.queued -= chunk.length;
    this.sendCredit -= chunk.length;
    if (this.wantDrain && !this.needsDrain) {
      this.wantDrain = false;
      queueMicrotask(() => this.emit("drain"));
    }
    return chunk;
  }

  afterEndSent(): void {
    if (this.remoteEnded && this.endEmitted) this.finish({ reason: null });
  }

  onCredit(n: number): void {
    // Credit only ever returns what was sent: more from a peer is clamped to the window.
    this.sendCredit = Math.min(STREAM_WINDOW, this.sendCredit + n);
    this.mux.schedule(this);
  }

  /** A DATA frame arrived; false when the peer exceeded its window (a protocol violation). */
  onData(payload: Buffer): boolean {
    if (payload.length > this.recvAllowance) return false;
    this.recvAllowance -= payload.length;
    if (this.paused || this.inQueue.length > 0) this.inQueue.push(payload);
    else this.deliver(payload);
    return true;
  }

  onEnd(): void {
    this.remoteEnded = true;
    this.maybeEmitEnd();
  }

  onReset(reason: ResetReason, message?: string): void {
    this.finish({ reason, ...(message !== undefined ? { message } : {}) });
  }

  private deliver(payload: Buffer): void {
    this.emit("data", payload);
    this.consumedUngranted += payload.length;
    if (this.consumedUngranted >= GRANT_BATCH && !this.closed && !this.remoteEnded) {
      // State first: the peer may answer the grant before sendCredit returns (in-memory channels).
      const n = this.consumedUngranted;
      this.recvAllowance += n;
      this.consumedUngranted = 0;
      this.mux.sendCredit(this.id, n);
    }
  }

  private maybeEmitEnd(): void {
    if (!this.remoteEnded || this.endEmitted || this.paused || this.inQueue.length > 0 || this.closed) return;
    this.endEmitted = true;
    this.emit("end");
    if (this.endSent) this.finish({ reason: null });
  }

  /** Closes locally (no frame sent); the mux forgets the stream. */
  finish(info: StreamClose): void {
    if (this.closedWith) return;
    this.closedWith = info;
    this.outQueue.length = 0;
    this.queued = 0;
    this.inQueue.length = 0;
    this.mux.forget(this);
    this.emit("close", info);
  }
}

interface MuxEvents<H> {
  /** The peer opened a stream (its `header` passed MuxOptions.header). */
  stream: [MuxStream<H>];
  /** The peer's HELLO arrived. */
  hello: [MuxHello];
  /** The channel is gone (closed, failed, malformed input or keepalive timeout); every stream closed with link-lost. */
  close: [string, MuxCloseCode];
  /** The peer asked for no new streams on this channel (open ones carry on). */
  goaway: [];
}

/** One encoded frame. */
export function encodeMuxFrame(type: MuxFrame, id: number, payload: Buffer): Buffer {
  const frame = Buffer.allocUnsafe(MUX_HEADER + payload.length);
  frame.writeUInt8(type, 0);
  frame.writeUInt32BE(id, 1);
  frame.writeUInt32BE(payload.length, 5);
  payload.copy(frame, MUX_HEADER);
  return frame;
}

/**
 * The peer's HELLO as this side uses it: every field checked, numbers clamped (a keepalive of
 * 1e10 ms would overflow node's timer into a ping every millisecond and a dead-link check that
 * never fires), or null when it is not a HELLO of this version.
 */
export function sanitizeHello(h: Record<string, unknown>): MuxHello | null {
  if (h.v !== MUX_VERSION || (h.role !== "client" && h.role !== "server")) return null;
  const k = typeof h.keepaliveMs === "number" && Number.isFinite(h.keepaliveMs) && h.keepaliveMs > 0 ? h.keepaliveMs : 0;
  const keepaliveMs = k === 0 ? 0 : Math.round(Math.min(MAX_PEER_KEEPALIVE_MS, Math.max(MIN_PEER_KEEPALIVE_MS, k)));
  const pid = typeof h.pid === "number" && Number.isSafeInteger(h.pid) && h.pid > 0 && h.pid < 2 ** 31 ? h.pid : undefined;
  const build = typeof h.build === "string" ? h.build.slice(0, MAX_HELLO_BUILD) : "";
  return { v: MUX_VERSION, role: h.role, build, keepaliveMs, ...(pid !== undefined ? { pid } : {}) };
}

function jsonPayload(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value), "utf8");
}

/** One end of a multiplexed channel. */
export class Mux<H = unknown> extends EventEmitter<MuxEvents<H>> implements StreamSink {
  private readonly streams = new Map<number, MuxStream<H>>();
  /** Streams with data (or END) and credit, in turn order. */
  private readonly turns = new Set<MuxStream>();
  private congested = false;
  /** Input is not read while our unsent control output is over MAX_CONTROL_BACKLOG. */
  private inputHeld = false;
  /** Frames written since the channel last asked for draining. */
  private congestedWrites = 0;
  /** A PING arrived while congested: one PONG goes out at the next drain (any byte proves life). */
  private pongOwed = false;
  private pumping = false;
  private parsing = false;
  private nextId: number;
  private peer: MuxHello | null = null;
  private closedWhy: string | null = null;
  private closedCode: MuxCloseCode | null = null;
  private lastRx = Date.now();
  /** checkAlive calls waiting for the peer to be heard from. */
  private readonly hearing = new Set<() => void>();
  private pingTimer: NodeJS.Timeout | undefined;
  private readonly chunks: Buffer[] = [];
  private avail = 0;
  private header: { type: number; id: number; len: number } | null = null;
  private readonly maxStreams: number;
  private readonly helloReceived: Promise<MuxHello>;
  private resolveHello!: (h: MuxHello) => void;
  private rejectHello!: (e: Error) => void;

  constructor(
    private readonly transport: Duplex,
    private readonly opts: MuxOptions<H>,
  ) {
    super();
    this.setMaxListeners(0);
    this.nextId = opts.role === "client" ? 1 : 2;
    this.maxStreams = opts.maxStreams ?? MAX_STREAMS;
    this.helloReceived = new Promise((resolve, reject) => {
      this.resolveHello = resolve;
      this.rejectHello = reject;
    });
    this.helloReceived.catch(() => undefined);
    transport.on("data", (chunk: Buffer) => this.onChunk(chunk));
    // A transport handed over paused (bytes already unshifted into it) starts flowing here.
    transport.resume();
    transport.on("drain", () => {
      this.congested = false;
      this.congestedWrites = 0;
      if (this.pongOwed) {
        this.pongOwed = false;
        this.writeFrame(MuxFrame.Pong, 0, Buffer.alloc(0));
      }
      if (this.inputHeld) {
        this.inputHeld = false;
        transport.resume();
      }
      this.pump();
    });
    transport.on("end", () => this.close("the peer closed the channel", "peer-closed"));
    transport.on("close", () => this.close("the channel closed", "transport-closed"));
    transport.on("error", (err: Error) => this.close(`channel error: ${err.message}`, "transport-error"));
    const hello: MuxHello = {
      v: MUX_VERSION,
      role: opts.role,
      build: opts.build,
      keepaliveMs: opts.keepaliveMs ?? 0,
      ...(opts.pid !== undefined ? { pid: opts.pid } : {}),
    };
    this.writeFrame(MuxFrame.Hello, 0, jsonPayload(hello));
    if (opts.role === "client") this.startKeepalive(opts.keepaliveMs ?? 0);
  }

  /** The peer's HELLO once it arrived. */
  get peerHello(): MuxHello | null {
    return this.peer;
  }

  get closed(): boolean {
    return this.closedWhy !== null;
  }

  get closeReason(): string | null {
    return this.closedWhy;
  }

  get closeCode(): MuxCloseCode | null {
    return this.closedCode;
  }

  get streamCount(): number {
    return this.streams.size;
  }

  /** Resolves with the peer's HELLO (rejects when the channel closes before it). */
  hello(): Promise<MuxHello> {
    return this.helloReceived;
  }

  /** Opens a stream; its OPEN frame is sent at once (before any of its DATA). */
  open(...[header]: unknown extends H ? [header?: H] : [header: H]): MuxStream<H> {
    if (this.closed) throw new MuxError(`mux channel is closed: ${this.closedWhy}`);
    if (this.streams.size >= this.maxStreams) throw new MuxError(`too many streams on one channel (${this.maxStreams})`);
    const id = this.nextId;
    this.nextId += 2;
    if (this.nextId > 0xffffffff) this.nextId = this.opts.role === "client" ? 1 : 2;
    const h = (header ?? {}) as H;
    const stream = new MuxStream(this, id, h);
    this.streams.set(id, stream);
    this.writeFrame(MuxFrame.Open, id, jsonPayload(h));
    return stream;
  }

  /** Asks the peer to open no more streams here. */
  goAway(): void {
    this.writeFrame(MuxFrame.GoAway, 0, Buffer.alloc(0));
  }

  /** Closes the channel: every stream closes with link-lost. */
  /**
   * Whether the peer still answers: a ping, and true as soon as anything arrives (the pong, or any
   * other frame; an earlier sign of life proves nothing now). Nothing within `ms`: the channel is
   * closed as dead (keepalive-timeout, as the keepalive would, only sooner) and the answer is false.
   * For an operation that must fail fast on a link that went silent with its connection still up.
   */
  checkAlive(ms: number): Promise<boolean> {
    if (this.closedWhy !== null) return Promise.resolve(false);
    return new Promise((resolve) => {
      const heard = () => {
        clearTimeout(timer);
        this.hearing.delete(heard);
        resolve(this.closedWhy === null);
      };
      const timer = setTimeout(() => {
        this.hearing.delete(heard);
        this.opts.log?.(`mux: no answer from the peer within ${ms} ms of a liveness check`);
        this.close(`no answer from the peer within ${ms} ms`, "keepalive-timeout");
        resolve(false);
      }, ms);
      timer.unref();
      this.hearing.add(heard);
      this.writeFrame(MuxFrame.Ping, 0, Buffer.alloc(0));
    });
  }

  close(why: string, code: MuxCloseCode = "local"): void {
    if (this.closedWhy !== null) return;
    this.closedWhy = why;
    this.closedCode = code;
    clearInterval(this.pingTimer);
    for (const heard of [...this.hearing]) heard();
    this.rejectHello(new MuxError(why));
    this.turns.clear();
    for (const s of [...this.streams.values()]) s.finish({ reason: "link-lost", message: why, channel: code });
    this.streams.clear();
    this.transport.destroy();
    this.emit("close", why, code);
  }

  // ---- used by MuxStream ----

  schedule(stream: MuxStream): void {
    if (stream.sendable()) this.turns.add(stream);
    this.pump();
  }

  forget(stream: MuxStream): void {
    this.streams.delete(stream.id);
    this.turns.delete(stream);
  }

  sendCredit(id: number, n: number): void {
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32BE(n, 0);
    this.writeFrame(MuxFrame.Credit, id, b);
  }

  sendReset(id: number, reason: ResetReason, message?: string): void {
    this.writeFrame(MuxFrame.Reset, id, jsonPayload({ reason, ...(message !== undefined ? { message } : {}) }));
  }

  // ---- internals ----

  private startKeepalive(ms: number): void {
    if (ms <= 0 || this.pingTimer) return;
    this.lastRx = Date.now();
    this.pingTimer = setInterval(() => {
      if (Date.now() - this.lastRx > MISSED_PINGS * ms) {
        this.opts.log?.(`mux: no answer from the peer for ${MISSED_PINGS} keepalive intervals of ${ms} ms`);
        this.close(`no answer from the peer for ${MISSED_PINGS * ms} ms`, "keepalive-timeout");
        return;
      }
      this.writeFrame(MuxFrame.Ping, 0, Buffer.alloc(0));
    }, ms);
    this.pingTimer.unref();
  }

  private writeFrame(type: MuxFrame, id: number, payload: Buffer): void {
    if (this.closedWhy !== null || this.transport.destroyed) return;
    if (this.congested) this.congestedWrites++;
    if (!this.transport.write(encodeMuxFrame(type, id, payload))) this.congested = true;
    const backlog = this.transport.writableLength - this.transport.writableHighWaterMark - SEND_CHUNK;
    if (!this.inputHeld && (backlog > MAX_CONTROL_BACKLOG || this.congestedWrites > MAX_CONTROL_FRAMES)) {
      // The peer is not reading what we answer: stop reading what it sends until it has.
      this.inputHeld = true;
      this.transport.pause();
    }
  }

  /** Sends DATA/END of ready streams in turns while the channel takes more. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (!this.congested && this.closedWhy === null && this.turns.size > 0) {
        const s = this.turns.values().next().value as MuxStream;
        this.turns.delete(s);
        if (!s.sendable()) continue;
        const chunk = s.takeChunk();
        if (chunk === null) {
          this.writeFrame(MuxFrame.End, s.id, Buffer.alloc(0));
          s.afterEndSent();
        } else {
          this.writeFrame(MuxFrame.Data, s.id, chunk);
        }
        if (s.sendable()) this.turns.add(s);
      }
    } finally {
      this.pumping = false;
    }
  }

  private fail(why: string): void {
    this.opts.log?.(`mux: ${why}; closing the channel`);
    this.close(`protocol error: ${why}`, "protocol-error");
  }

  private onChunk(chunk: Buffer): void {
    if (this.closedWhy !== null) return;
    this.lastRx = Date.now();
    for (const heard of [...this.hearing]) heard();
    this.chunks.push(chunk);
    this.avail += chunk.length;
    // A consumer reacting to a frame may make the peer answer synchronously (in-memory channels):
    // the outer loop picks those bytes up, so frames are always handled one after another.
    if (this.parsing) return;
    this.parsing = true;
    try {
      this.parseFrames();
    } finally {
      this.parsing = false;
    }
  }

  private parseFrames(): void {
    // Frames already read are parsed even while input is held: at most one transport chunk's worth.
    while (this.closedWhy === null) {
      if (!this.header) {
        if (this.avail < MUX_HEADER) return;
        const h = this.take(MUX_HEADER);
        const type = h.readUInt8(0);
        const id = h.readUInt32BE(1);
        const len = h.readUInt32BE(5);
        if (type < MuxFrame.Hello || type > MuxFrame.GoAway) return this.fail(`unknown frame type ${type}`);
        if (len > MAX_MUX_PAYLOAD) return this.fail(`frame of ${len} bytes exceeds ${MAX_MUX_PAYLOAD}`);
        this.header = { type, id, len };
      }
      if (this.avail < this.header.len) return;
      const { type, id, len } = this.header;
      this.header = null;
      this.onFrame(type as MuxFrame, id, this.take(len));
    }
  }

  /** Removes `n` bytes from the front of the input (copying only when they span chunks). */
  private take(n: number): Buffer {
    this.avail -= n;
    if (n === 0) return Buffer.alloc(0);
    const first = this.chunks[0]!;
    if (first.length === n) return this.chunks.shift()!;
    if (first.length > n) {
      this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let off = 0;
    while (off < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.length, n - off);
      c.copy(out, off, 0, k);
      off += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    return out;
  }

  private parseJson(payload: Buffer, what: string): Record<string, unknown> | null {
    try {
      const v = JSON.parse(payload.toString("utf8")) as unknown;
      if (typeof v === "object" && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      // reported below
    }
    this.fail(`${what} is not a JSON object`);
    return null;
  }

  private onFrame(type: MuxFrame, id: number, payload: Buffer): void {
    if (this.peer === null && type !== MuxFrame.Hello) return this.fail("the first frame is not HELLO");
    switch (type) {
      case MuxFrame.Hello: {
        if (this.peer !== null) return this.fail("a second HELLO");
        const h = this.parseJson(payload, "HELLO");
        if (!h) return;
        if (h.v !== MUX_VERSION) return this.fail(`peer speaks mux version ${String(h.v)}, this side ${MUX_VERSION}`);
        const hello = sanitizeHello(h);
        if (!hello) return this.fail("HELLO fields are malformed");
        this.peer = hello;
        if (this.opts.role === "server") this.startKeepalive(hello.keepaliveMs);
        this.resolveHello(this.peer);
        this.emit("hello", this.peer);
        return;
      }
      case MuxFrame.Ping:
        // A peer that does not read our answers needs no more of them (the drain sends one).
        if (this.congested) this.pongOwed = true;
        else this.writeFrame(MuxFrame.Pong, 0, Buffer.alloc(0));
        return;
      case MuxFrame.Pong:
        return;
      case MuxFrame.GoAway:
        this.emit("goaway");
        return;
      case MuxFrame.Open: {
        const peerParity = this.opts.role === "client" ? 0 : 1;
        if (id === 0 || id % 2 !== peerParity) return this.fail(`OPEN with stream id ${id} of the wrong side`);
        if (this.streams.has(id)) return this.fail(`OPEN of stream ${id}, which is open`);
        const header = this.parseJson(payload, "OPEN header");
        if (!header) return;
        const refusal =
          this.streams.size >= this.maxStreams
            ? `too many streams on one channel (${this.maxStreams})`
            : this.listenerCount("stream") === 0
              ? "not accepting streams"
              : this.opts.header && !this.opts.header(header)
                ? `unknown or malformed stream header (kind ${JSON.stringify(header.kind)?.slice(0, 40) ?? "none"})`
                : null;
        if (refusal !== null) return this.sendReset(id, "refused", refusal);
        // Checked above when H is declared (MuxOptions requires the guard then); unknown otherwise.
        const stream = new MuxStream(this, id, header as H);
        this.streams.set(id, stream);
        this.emit("stream", stream);
        return;
      }
      case MuxFrame.Data: {
        const s = this.streams.get(id);
        // A stream reset here may still receive the peer's DATA sent before our RESET reached it.
        if (!s) return;
        if (!s.onData(payload)) return this.fail(`stream ${id} sent beyond its window`);
        return;
      }
      case MuxFrame.Credit: {
        if (payload.length !== 4) return this.fail("CREDIT payload is not 4 bytes");
        this.streams.get(id)?.onCredit(payload.readUInt32BE(0));
        return;
      }
      case MuxFrame.End:
        this.streams.get(id)?.onEnd();
        return;
      case MuxFrame.Reset: {
        const r = this.parseJson(payload, "RESET");
        if (!r) return;
        const reason = RESET_REASONS.includes(r.reason as ResetReason) ? (r.reason as ResetReason) : "error";
        // The message may reach a user's one error line: a peer's is cut to a line's length.
        this.streams.get(id)?.onReset(reason, typeof r.message === "string" ? r.message.slice(0, MAX_RESET_MESSAGE) : undefined);
        return;
      }
    }
  }
}
