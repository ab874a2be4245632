// Newline-delimited frame decoding exactly as Paseo decodes our fd4 (docs/contract.md#framing); we use the same
// rules for the fd3 controls we read. Chunks may split frames (and UTF-8 sequences) anywhere.
import type { Readable } from "node:stream";
import type * as z from "./zod-mini.js";
import { RuntimeError } from "../shared/errors.js";
import { parseJsonText, validateMessage } from "./codec.js";

export const EMPTY_FRAME = "Command runtime message frame is empty";
export const UNTERMINATED_FRAME = "Command runtime message ended before newline";

export class FrameDecoder<S extends z.core.$ZodType> {
  // Non-fatal: invalid bytes become U+FFFD instead of failing the stream, as in Paseo.
  private readonly utf8 = new TextDecoder("utf-8", { fatal: false });
  // Text of the line in progress, in pieces: searching and joining only new text keeps a long
  // line linear instead of re-copying everything received so far on every chunk.
  private pending: string[] = [];

  constructor(private readonly schema: S) {}

  /** Returns the frames completed by this chunk; throws on the first bad frame. */
  push(chunk: Uint8Array | string): z.output<S>[] {
    const text = typeof chunk === "string" ? chunk : this.utf8.decode(chunk, { stream: true });
    const frames: z.output<S>[] = [];
    let start = 0;
    for (let newline = text.indexOf("\n"); newline >= 0; newline = text.indexOf("\n", start)) {
      this.pending.push(text.slice(start, newline));
      const line = this.pending.join("");
      this.pending = [];
      start = newline + 1;
      frames.push(this.decodeLine(line));
    }
    if (start < text.length) this.pending.push(text.slice(start));
    return frames;
  }

  /** Call at end of stream: leftover text (even an incomplete UTF-8 sequence) is an error. */
  end(): void {
    const rest = this.pending.join("") + this.utf8.decode();
    this.pending = [];
    if (rest.length > 0) throw new RuntimeError("input", UNTERMINATED_FRAME);
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
