// The one reader of newline-delimited JSON (and text lines) on sockets and pipes: every wire of
// ours that speaks in lines (the broker's, the terminal relay's status, the PTY attach socket,
// the agent's first answer, fd3 controls) splits them here, each with a bound on the line in
// progress, so a peer that never sends a newline costs at most that many bytes, not all memory.
// Built-ins only: bundled into the remote agent as well.
import type { Readable } from "node:stream";
import { parseJson, type Guard } from "./guards.js";

/** A line grew past the reader's bound without its newline (or arrived longer than it). */
export class LineTooLong extends Error {
  constructor(readonly maxLine: number) {
    super(`a line exceeds ${maxLine} bytes`);
  }
}

/**
 * Splits bytes into lines (without their "\n"). The line in progress is kept in pieces and joined
 * once, so a line of several MiB costs no re-copying per chunk. Lines split on bytes: "\n" never
 * occurs inside a UTF-8 sequence, so each line decodes on its own.
 */
export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(readonly maxLine: number) {}

  /** The lines this chunk completes; throws LineTooLong once a line passes `maxLine`. */
  push(chunk: Buffer | string): Buffer[] {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    const lines: Buffer[] = [];
    let start = 0;
    for (let nl = bytes.indexOf(0x0a); nl >= 0; nl = bytes.indexOf(0x0a, start)) {
      if (this.pendingBytes + nl - start > this.maxLine) throw new LineTooLong(this.maxLine);
      const piece = bytes.subarray(start, nl);
      lines.push(this.pending.length === 0 ? piece : Buffer.concat([...this.pending, piece]));
      this.pending = [];
      this.pendingBytes = 0;
      start = nl + 1;
    }
    if (start < bytes.length) {
      this.pending.push(bytes.subarray(start));
      this.pendingBytes += bytes.length - start;
      if (this.pendingBytes > this.maxLine) throw new LineTooLong(this.maxLine);
    }
    return lines;
  }

  /** The bytes after the last newline; the splitter forgets them. */
  takeRest(): Buffer {
    const rest = Buffer.concat(this.pending);
    this.pending = [];
    this.pendingBytes = 0;
    return rest;
  }
}

/** Why one awaited line did not come (callers that act on it branch on this). */
export type LineFailure = "timeout" | "closed" | "failed" | "too-long" | "not-json" | "malformed";

export class LineReadError extends Error {
  constructor(
    readonly reason: LineFailure,
    readonly detail?: string,
  ) {
    super(detail === undefined ? reason : `${reason}: ${detail}`);
  }
}

export interface FirstLineOptions {
  maxLine: number;
  timeoutMs: number;
  /** Bytes already read from the stream that come before anything it still delivers. */
  head?: Buffer;
  /** Bytes after the newline go back into the stream (unshift), which is left paused. */
  unshiftRest?: boolean;
}

/**
 * The first line of `stream` (bounded in bytes and time); rejects with LineReadError. With
 * `unshiftRest`, what follows the line stays in the stream for its next reader.
 */
export function readFirstLine(stream: Readable, opts: FirstLineOptions): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const splitter = new LineSplitter(opts.maxLine);
    const timer = setTimeout(() => fail(new LineReadError("timeout")), opts.timeoutMs);
    const stop = () => {
      clearTimeout(timer);
      stream.off("data", onData);
      stream.off("close", onClose);
      stream.off("end", onClose);
      stream.off("error", onError);
    };
    const fail = (err: LineReadError) => {
      stop();
      reject(err);
    };
    const onData = (chunk: Buffer | string): boolean => {
      let line: Buffer | undefined;
      try {
        line = splitter.push(chunk)[0];
      } catch {
        fail(new LineReadError("too-long"));
        return true;
      }
      if (line === undefined) return false;
      stop();
      if (opts.unshiftRest === true) {
        stream.pause();
        // The splitter stops at the first line: everything after it is the rest, unsplit.
        const all = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
        const rest = all.subarray(all.indexOf(0x0a) + 1);
        if (rest.length > 0) stream.unshift(rest);
      }
      resolve(line);
      return true;
    };
    const onClose = () => fail(new LineReadError("closed"));
    const onError = (err: Error) => fail(new LineReadError("failed", err.message));
    if (opts.head !== undefined && opts.head.length > 0 && onData(opts.head)) return;
    stream.on("data", onData);
    stream.once("end", onClose);
    stream.once("close", onClose);
    stream.once("error", onError);
    stream.resume();
  });
}

/** The first line of `stream` as JSON that passes `guard` (LineReadError not-json / malformed otherwise). */
export async function readJsonLine<T>(stream: Readable, guard: Guard<T>, opts: FirstLineOptions): Promise<T> {
  const value = parseJson(await readFirstLine(stream, opts));
  if (value === undefined) throw new LineReadError("not-json");
  if (!guard(value)) throw new LineReadError("malformed");
  return value;
}

export interface JsonLinesOptions<T> {
  maxLine: number;
  guard: Guard<T>;
  /** A line that is not JSON, or JSON that fails the guard: "skip" it, or "stop" reading (the default). */
  onInvalid?: "skip" | "stop";
  /** Reading stopped on a bad line (too long, or invalid with onInvalid "stop"); the stream is not touched. */
  onStop?(why: "too-long" | "not-json" | "malformed"): void;
}

/**
 * Calls `handle` for each line of `stream` that is JSON passing `guard`, in order; empty lines are
 * skipped. Returns a function that stops reading.
 */
export function onJsonLines<T>(stream: Readable, opts: JsonLinesOptions<T>, handle: (msg: T) => void): () => void {
  const splitter = new LineSplitter(opts.maxLine);
  let stopped = false;
  const halt = (why: "too-long" | "not-json" | "malformed") => {
    stop();
    opts.onStop?.(why);
  };
  const onData = (chunk: Buffer | string) => {
    let lines: Buffer[];
    try {
      lines = splitter.push(chunk);
    } catch {
      return halt("too-long");
    }
    for (const line of lines) {
      if (stopped) return;
      if (line.length === 0) continue;
      const value = parseJson(line);
      if (value !== undefined && opts.guard(value)) handle(value);
      else if (opts.onInvalid !== "skip") return halt(value === undefined ? "not-json" : "malformed");
    }
  };
  const stop = () => {
    stopped = true;
    stream.off("data", onData);
  };
  stream.on("data", onData);
  return stop;
}
