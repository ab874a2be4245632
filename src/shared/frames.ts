// Binary framing between a runtime process and the remote agent over one SSH channel.
// SSH gives a channel only stdin/stdout/stderr; every logical stream (JSON control, workload
// stdin/stdout/stderr, EOFs) is multiplexed here so bytes stay exact and ordered.
// Layout: [kind u8][length u32 big-endian][payload]. Shared by both sides (bundled into the agent).

export const FrameKind = {
  /** UTF-8 JSON control message (or the last part of one longer than a frame). */
  Json: 0x01,
  /** A leading part of a JSON message longer than one frame; its Json frame follows. */
  JsonPart: 0x02,
  /** Workload stdin bytes (runtime -> agent). */
  Stdin: 0x10,
  /** Workload stdout bytes (agent -> runtime). */
  Stdout: 0x11,
  /** Workload stderr bytes (agent -> runtime). */
  Stderr: 0x12,
  /** End of one byte stream; payload is one byte: 0 stdin, 1 stdout, 2 stderr. */
  Eof: 0x20,
} as const;
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

export interface Frame {
  kind: FrameKind;
  payload: Buffer;
}

/** Large enough for throughput, small enough that one frame never monopolises a channel. */
export const MAX_FRAME_PAYLOAD = 1024 * 1024;
/**
 * Longest JSON message (sent as JsonPart frames and a final Json frame). The largest legitimate
 * one is an exec request: at most a few MiB of argv and env (all a host's execve accepts).
 */
export const MAX_JSON_MESSAGE = 64 * 1024 * 1024;
const HEADER = 5;
const KINDS = new Set<number>(Object.values(FrameKind));

/** Written by the agent before any frame so that login-shell noise on stdout can be skipped. */
export const AGENT_READY_MARKER = Buffer.from("\x00\x1ePASEO-SSH-AGENT-READY\x1e\x00", "latin1");

export function encodeFrame(kind: FrameKind, payload: Buffer | Uint8Array = Buffer.alloc(0)): Buffer {
  if (payload.length > MAX_FRAME_PAYLOAD) throw new Error(`frame payload too large: ${payload.length}`);
  const out = Buffer.allocUnsafe(HEADER + payload.length);
  out.writeUInt8(kind, 0);
  out.writeUInt32BE(payload.length, 1);
  out.set(payload, HEADER);
  return out;
}

export function encodeJson(value: unknown): Buffer {
  const frames = encodeMessage(FrameKind.Json, Buffer.from(JSON.stringify(value), "utf8"));
  return frames.length === 1 ? frames[0]! : Buffer.concat(frames);
}

/** Splits data larger than one frame into several frames of the same kind. */
export function encodeData(kind: FrameKind, data: Buffer): Buffer[] {
  const frames: Buffer[] = [];
  for (let off = 0; off < data.length; off += MAX_FRAME_PAYLOAD) {
    frames.push(encodeFrame(kind, data.subarray(off, Math.min(data.length, off + MAX_FRAME_PAYLOAD))));
  }
  return frames;
}

/** One decoded frame as frames again: a long JSON message as JsonPart frames and a Json frame. */
export function encodeMessage(kind: FrameKind, payload: Buffer): Buffer[] {
  if (kind !== FrameKind.Json || payload.length <= MAX_FRAME_PAYLOAD) return [encodeFrame(kind, payload)];
  const last = payload.length - ((payload.length - 1) % MAX_FRAME_PAYLOAD) - 1;
  return [...encodeData(FrameKind.JsonPart, payload.subarray(0, last)), encodeFrame(FrameKind.Json, payload.subarray(last))];
}

export class FrameError extends Error {}

/**
 * Incremental decoder: push chunks of any size, get whole frames back in order. JsonPart frames
 * are joined with the Json frame that ends their message, so consumers only see whole messages.
 */
export class BinaryFrameDecoder {
  private buf: Buffer = Buffer.alloc(0);
  private jsonParts: Buffer[] = [];
  private jsonBytes = 0;
  /** Longest JSON message accepted from now on (a conversation lowers it after its request). */
  maxJsonMessage = MAX_JSON_MESSAGE;

  push(chunk: Buffer): Frame[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const frames: Frame[] = [];
    while (this.buf.length >= HEADER) {
      const kind = this.buf.readUInt8(0);
      const len = this.buf.readUInt32BE(1);
      if (!KINDS.has(kind)) throw new FrameError(`unknown frame kind 0x${kind.toString(16)}`);
      if (len > MAX_FRAME_PAYLOAD) throw new FrameError(`frame too large: ${len}`);
      if (this.buf.length < HEADER + len) break;
      const payload = Buffer.from(this.buf.subarray(HEADER, HEADER + len));
      this.buf = this.buf.subarray(HEADER + len);
      if (kind === FrameKind.JsonPart || (kind === FrameKind.Json && this.jsonParts.length > 0)) {
        this.jsonBytes += len;
        if (this.jsonBytes > this.maxJsonMessage) throw new FrameError(`JSON message longer than ${this.maxJsonMessage} bytes`);
        this.jsonParts.push(payload);
        if (kind === FrameKind.JsonPart) continue;
        frames.push({ kind: FrameKind.Json, payload: Buffer.concat(this.jsonParts) });
        this.jsonParts = [];
        this.jsonBytes = 0;
        continue;
      }
      frames.push({ kind: kind as FrameKind, payload });
    }
    return frames;
  }

  /** Bytes of an incomplete frame still buffered (non-zero at stream end means truncation). */
  get pending(): number {
    return this.buf.length;
  }

  /** Bytes held for an unfinished message: the incomplete frame plus the parts of a long JSON message. */
  get held(): number {
    return this.buf.length + this.jsonBytes;
  }
}

/**
 * Follows frame boundaries in a byte stream without decoding it (the broker relays conversations
 * verbatim, and may add a last frame of its own only between two frames).
 */
export class FrameBoundary {
  private header = 0;
  private readonly headerBytes = Buffer.alloc(HEADER);
  private payloadLeft = 0;

  push(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length) {
      if (this.payloadLeft > 0) {
        const k = Math.min(this.payloadLeft, chunk.length - off);
        this.payloadLeft -= k;
        off += k;
        continue;
      }
      const k = Math.min(HEADER - this.header, chunk.length - off);
      chunk.copy(this.headerBytes, this.header, off, off + k);
      this.header += k;
      off += k;
      if (this.header === HEADER) {
        this.header = 0;
        this.payloadLeft = this.headerBytes.readUInt32BE(1);
      }
    }
  }

  /** True when everything pushed so far ends with a complete frame. */
  get atBoundary(): boolean {
    return this.header === 0 && this.payloadLeft === 0;
  }
}

/**
 * Finds the agent's ready marker in the first bytes of a channel's stdout. Everything before it is
 * login-shell noise and is discarded; returns the bytes after the marker once it has been seen.
 */
export class MarkerScanner {
  private seen: Buffer = Buffer.alloc(0);
  found = false;
  /** Noise seen before the marker (kept short, for diagnostics). */
  noise = "";

  push(chunk: Buffer): Buffer | null {
    if (this.found) return chunk;
    this.seen = Buffer.concat([this.seen, chunk]);
    const at = this.seen.indexOf(AGENT_READY_MARKER);
    if (at < 0) {
      // Keep only the tail that could still be the start of the marker.
      const keep = AGENT_READY_MARKER.length - 1;
      if (this.seen.length > keep) {
        this.noise = (this.noise + this.seen.subarray(0, this.seen.length - keep).toString("utf8")).slice(-2000);
        this.seen = this.seen.subarray(this.seen.length - keep);
      }
      return null;
    }
    this.noise = (this.noise + this.seen.subarray(0, at).toString("utf8")).slice(-2000);
    this.found = true;
    const rest = this.seen.subarray(at + AGENT_READY_MARKER.length);
    this.seen = Buffer.alloc(0);
    return rest;
  }
}
