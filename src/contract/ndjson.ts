// Newline-delimited frame decoding exactly as Paseo decodes our fd4 (docs/contract.md#framing); we use the same
// rules for the fd3 controls we read. Chunks may split frames (and UTF-8 sequences) anywhere.
import type { Readable } from "node:stream";
import type * as z from "./zod-mini.js";
import { RuntimeError } from "../shared/errors.js";
import { LineSplitter } from "../shared/json-lines.js";
import { parseJsonText, validateMessage } from "./codec.js";

export const EMPTY_FRAME = "Command runtime message frame is empty";
export const UNTERMINATED_FRAME = "Command runtime message ended before newline";

export class FrameDecoder<S extends z.core.$ZodType> {
  // Non-fatal: invalid bytes become U+FFFD instead of failing the stream, as in Paseo. Each line
  // decodes on its own ("\n" never occurs inside a UTF-8 sequence).
  // ignoreBOM: a BOM is dropped only where a stream decoder would, at the very start.
  private readonly utf8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  private readonly lines: LineSplitter;
  private atStart = true;

  /** `maxLine`: bytes a frame may have (LineTooLong beyond it); unbounded by default. */
  constructor(
    private readonly schema: S,
    maxLine = Number.POSITIVE_INFINITY,
  ) {
    this.lines = new LineSplitter(maxLine);
  }

  /** Returns the frames completed by this chunk; throws on the first bad frame. */
  push(chunk: Uint8Array | string): z.output<S>[] {
    const bytes = typeof chunk === "string" ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    return this.lines.push(bytes).map((line) => this.decodeLine(this.text(line)));
  }

  /** Call at end of stream: leftover bytes (even an incomplete UTF-8 sequence) are an error. */
  end(): void {
    if (this.lines.takeRest().length > 0) throw new RuntimeError("input", UNTERMINATED_FRAME);
  }

  private text(line: Buffer): string {
    const text = this.utf8.decode(line);
    if (!this.atStart) return text;
    this.atStart = false;
    return text.startsWith("\uFEFF") ? text.slice(1) : text;
  }

  private decodeLine(line: string): z.output<S> {
    if (line.length === 0) throw new RuntimeError("input", EMPTY_FRAME);
    return validateMessage(this.schema, parseJsonText(line));
  }
}

/** Decodes a whole stream frame by frame; throws the decoder's error at the first bad frame. */
export async function* readFrames<S extends z.core.$ZodType>(stream: Readable, schema: S): AsyncGenerator<z.output<S>> {
  const decoder = new FrameDecoder(schema);
  for await (const chunk of stream) {
    yield* decoder.push(chunk as Uint8Array | string);
  }
  decoder.end();
}

/** Decodes a complete buffer (tests, recorded conversations). */
export function decodeFrames<S extends z.core.$ZodType>(bytes: Uint8Array | string, schema: S): z.output<S>[] {
  const decoder = new FrameDecoder(schema);
  const frames = decoder.push(bytes);
  decoder.end();
  return frames;
}
