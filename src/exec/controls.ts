// Reading fd3 (docs/contract.md#exec-fd3): newline-delimited frames decoded exactly like Paseo's decoder, then
// validated strictly. The first frame must be the spawn envelope; later ones (PTY) are resize and
// signal controls. A resize with a non-positive or non-integer size is named `Invalid PTY size`
// before any other validation message (docs/contract.md#exec-fd3).
import type { Readable } from "node:stream";
import * as z from "../contract/zod-mini.js";
import { RuntimeError } from "../shared/errors.js";
import { isPositiveInt, isRecord } from "../shared/guards.js";
// The exec schemas' own module and the codecs, not contract/index.js: the wrapper constructs no
// lifecycle or response schema.
import { ControlFrameSchema, SpawnControlSchema } from "../contract/exec-schemas.js";
import { validateMessage } from "../contract/codec.js";
import { FrameDecoder } from "../contract/ndjson.js";
import { LineTooLong } from "../shared/json-lines.js";

export type SpawnEnvelope = z.output<typeof SpawnControlSchema>;
export type ControlFrame = z.output<typeof ControlFrameSchema>;

/** How long Paseo has to write the envelope after starting us (it writes it immediately). */
export const ENVELOPE_TIMEOUT_MS = 30_000;
/**
 * Longest fd3 line we read. The largest envelope a host can run is a few MiB of argv+env (Linux
 * allows at most 6 MiB), which stays far below this even with JSON escaping of quotes and
 * backslashes; a writer that sends more without a newline is not Paseo.
 */
export const MAX_CONTROL_LINE = 16 * 1024 * 1024;
const RUNTIME_INSTANCE_ID = /^[a-f0-9]{64}$/;

export function validateControl(value: unknown): ControlFrame {
  if (isRecord(value) && value.type === "resize" && (!isPositiveInt(value.rows) || !isPositiveInt(value.cols))) {
    throw new RuntimeError("input", "Invalid PTY size");
  }
  return validateMessage(ControlFrameSchema, value, "Invalid control frame: ");
}

export function validateEnvelope(value: unknown): SpawnEnvelope {
  const frame = validateControl(value);
  if (frame.type !== "spawn") throw new RuntimeError("input", `the first fd3 frame must be the spawn envelope, got ${frame.type}`);
  if (!RUNTIME_INSTANCE_ID.test(frame.runtimeInstanceId)) {
    throw new RuntimeError("input", "Runtime instance id must be a SHA-256 identity");
  }
  return frame;
}

export interface ControlReader {
  /** The validated spawn envelope (rejects on a bad first frame, EOF or timeout). */
  envelope: Promise<SpawnEnvelope>;
  /** Later controls, in order; `error` for an invalid frame (the reader stops), `end` at fd3 EOF. */
  onControl(listener: (c: { frame?: ControlFrame; error?: RuntimeError; end?: true }) => void): void;
  close(): void;
}

export function readControls(stream: Readable): ControlReader {
  const decoder = new FrameDecoder(z.unknown(), MAX_CONTROL_LINE);
  const queue: Array<{ frame?: ControlFrame; error?: RuntimeError; end?: true }> = [];
  let listener: ((c: { frame?: ControlFrame; error?: RuntimeError; end?: true }) => void) | null = null;
  let gotEnvelope = false;
  let stopped = false;
  let resolveEnv!: (e: SpawnEnvelope) => void;
  let rejectEnv!: (e: Error) => void;
  const envelope = new Promise<SpawnEnvelope>((res, rej) => {
    resolveEnv = res;
    rejectEnv = rej;
  });
  envelope.catch(() => undefined);
  // Past the timeout nothing more is read: a writer that never finishes cannot keep us buffering.
  const timer = setTimeout(
    () => fail(new RuntimeError("input", `no spawn envelope on fd3 within ${ENVELOPE_TIMEOUT_MS} ms`)),
    ENVELOPE_TIMEOUT_MS,
  );
  const emit = (c: { frame?: ControlFrame; error?: RuntimeError; end?: true }) => (listener ? listener(c) : queue.push(c));
  const fail = (err: unknown) => {
    stopped = true;
    const e =
      err instanceof LineTooLong
        ? new RuntimeError("input", `fd3 control frame exceeds ${MAX_CONTROL_LINE / (1024 * 1024)} MiB without a newline`)
        : err instanceof RuntimeError
          ? err
          : new RuntimeError("input", err instanceof Error ? `${err.name}: ${err.message}` : String(err));
    if (!gotEnvelope) {
      clearTimeout(timer);
      rejectEnv(e);
    } else emit({ error: e });
    stream.destroy();
  };
  stream.on("data", (chunk: Buffer) => {
    if (stopped) return;
    try {
      for (const value of decoder.push(chunk)) {
        if (!gotEnvelope) {
          const env = validateEnvelope(value);
          gotEnvelope = true;
          clearTimeout(timer);
          resolveEnv(env);
        } else emit({ frame: validateControl(value) });
      }
    } catch (err) {
      fail(err);
    }
  });
  const onEnd = () => {
    if (stopped) return;
    try {
      decoder.end();
    } catch (err) {
      fail(err);
      return;
    }
    stopped = true;
    if (!gotEnvelope) {
      clearTimeout(timer);
      rejectEnv(new RuntimeError("input", "fd3 closed before the spawn envelope"));
    } else emit({ end: true });
  };
  stream.on("end", onEnd);
  stream.on("error", (err) => (gotEnvelope ? onEnd() : fail(err)));
  return {
    envelope,
    onControl(l) {
      listener = l;
      for (const c of queue.splice(0)) l(c);
    },
    close() {
      stopped = true;
      clearTimeout(timer);
      stream.destroy();
    },
  };
}
