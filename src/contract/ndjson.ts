// Newline-delimited frame decoding exactly as Paseo decodes our fd4 (docs/contract.md#framing); we use the same
// rules for the fd3 controls we read. Chunks may split frames (and UTF-8 sequences) anywhere.
import type { Readable } from "node:stream";
import type * as z from "zod";
import { RuntimeError } from "../shared/errors.js";
import { parseJsonText, validateMessage } from "./codec.js";

export const EMPTY_FRAME = "Command runtime message frame is empty";
export const UNTERMINATED_FRAME = "Command runtime message ended before newline";

export class FrameDecoder<S extends z.ZodType> {
  // Non-fatal: invalid bytes become U+FFFD instead of failing the stream, as in Paseo.
  private readonly utf8 = new TextDecoder("utf-8", { fatal: false });
  private pending = "";

  constructor(private readonly schema: S) {}

  /** Returns the frames completed by this chunk; throws on the first bad frame. */
  push(chunk: Uint8Array | string): z.output<S>[] {
    this.pending += typeof chunk === "string" ? chunk : this.utf8.decode(chunk, { stream: true });
    const frames: z.output<S>[] = [];
    let newline: number;
    while ((newline = this.pending.indexOf("\n")) >= 0) {
      const line = this.pending.slice(0, newline);
      this.pending = this.pending.slice(newline + 1);
      frames.push(this.decodeLine(line));
    }
    return frames;
  }

  /** Call at end of stream: leftover text (even an incomplete UTF-8 sequence) is an error. */
  end(): void {
    this.pending += this.utf8.decode();
    if (this.pending.length > 0) throw new RuntimeError("input", UNTERMINATED_FRAME);
  }

  private decodeLine(line: string): z.output<S> {
    if (line.length === 0) throw new RuntimeError("input", EMPTY_FRAME);
    return validateMessage(this.schema, parseJsonText(line));
  }
}

/** Decodes a whole stream frame by frame; throws the decoder's error at the first bad frame. */
export async function* readFrames<S extends z.ZodType>(stream: Readable, schema: S): AsyncGenerator<z.output<S>> {
  const decoder = new FrameDecoder(schema);
  for await (const chunk of stream) {
    yield* decoder.push(chunk as Uint8Array | string);
  }
  decoder.end();
}

/** Decodes a complete buffer (tests, recorded conversations). */
export function decodeFrames<S extends z.ZodType>(bytes: Uint8Array | string, schema: S): z.output<S>[] {
  const decoder = new FrameDecoder(schema);
  const frames = decoder.push(bytes);
  decoder.end();
  return frames;
}
