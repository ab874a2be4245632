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

const EMPTY = Buffer.alloc(0);

/**
 * Incremental decoder: push chunks of any size, get whole frames back in order. JsonPart frames
 * are joined with the Json frame that ends their message, so consumers only see whole messages.
 */
export class BinaryFrameDecoder {
  /**
   * Chunks not yet decoded, oldest first (the first may be partly consumed: `offset`). A frame's
   * bytes are copied once, into its payload, however many chunks it spans: joining the buffered
   * bytes with every chunk instead copied a 1 MiB frame arriving in 32 KiB SSH packets ~16 times.
   */
  private parts: Buffer[] = [];
  /** Index of the first chunk still in use (dropping from the front of an array is O(length)). */
  private first = 0;
  private offset = 0;
  private size = 0;
  private jsonParts: Buffer[] = [];
  private jsonBytes = 0;
  /** Longest JSON message accepted from now on (a conversation lowers it after its request). */
  maxJsonMessage = MAX_JSON_MESSAGE;

  /** Copies `n` buffered bytes from the front into a new buffer and drops them. */
  private take(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const head = this.parts[this.first]!;
      const part = head.subarray(this.offset, this.offset + (n - filled));
      part.copy(out, filled);
      filled += part.length;
      this.offset += part.length;
      if (this.offset === head.length) {
        // A consumed chunk must not stay reachable from the array: a stream whose frames span
        // chunks never empties it, and 1,024 spent 64 KiB chunks were 64 MiB kept alive.
        this.parts[this.first] = EMPTY;
        this.first++;
        this.offset = 0;
      }
    }
    this.size -= n;
    if (this.first === this.parts.length) {
      this.parts = [];
      this.first = 0;
    } else if (this.first > 1024 && this.first * 2 > this.parts.length) {
      this.parts = this.parts.slice(this.first);
      this.first = 0;
    }
    return out;
  }

  /** The next frame's header without consuming it (the caller made sure HEADER bytes are buffered). */
  private peekHeader(): { kind: number; len: number } {
    const head = this.parts[this.first]!;
    if (head.length - this.offset >= HEADER) {
      return { kind: head.readUInt8(this.offset), len: head.readUInt32BE(this.offset + 1) };
    }
    // Split across chunks (rare): join the chunks that hold it (a header spans at most 5).
    const upTo = Math.min(this.parts.length, this.first + HEADER);
    const joined = Buffer.concat([head.subarray(this.offset), ...this.parts.slice(this.first + 1, upTo)]);
    this.parts = [joined, ...this.parts.slice(upTo)];
    this.first = 0;
    this.offset = 0;
    return { kind: joined.readUInt8(0), len: joined.readUInt32BE(1) };
  }

  push(chunk: Buffer): Frame[] {
    if (chunk.length > 0) {
      this.parts.push(chunk);
      this.size += chunk.length;
    }
    const frames: Frame[] = [];
    while (this.size >= HEADER) {
      const { kind, len } = this.peekHeader();
      if (!KINDS.has(kind)) throw new FrameError(`unknown frame kind 0x${kind.toString(16)}`);
      if (len > MAX_FRAME_PAYLOAD) throw new FrameError(`frame too large: ${len}`);
      if (this.size < HEADER + len) break;
      this.take(HEADER);
      const payload = this.take(len);
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
    return this.size;
  }

  /** Bytes held for an unfinished message: the incomplete frame plus the parts of a long JSON message. */
  get held(): number {
    return this.size + this.jsonBytes;
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
