// Reads and checks the lifecycle request Paseo writes on stdin (docs/contract.md#schemas) before an
// operation does anything else: no network use happens for a request we would refuse.
import type { Readable } from "node:stream";
import { RuntimeError } from "../shared/errors.js";
// The request's own schema module, not contract/index.js: an operation that only reads a request
// (signal) constructs no response schema.
import { LifecycleRequestSchema } from "../contract/lifecycle-schemas.js";
import type { LifecycleRequest } from "../contract/schemas.js";
import { parseJsonText, validateMessage } from "../contract/codec.js";

export const MAX_REQUEST_BYTES = 16 * 1024 * 1024;
export const STDIN_TIMEOUT_MS = 30_000;
const RUNTIME_INSTANCE_ID = /^[a-f0-9]{64}$/;

export interface LifecycleInputOptions {
  /** The operation word, for messages (`create input is required`). */
  operation: string;
  /** `create`: the request must carry `input`. */
  requireInput?: boolean;
  /** `reconcile`: the request must carry `workspaceIds`. */
  requireWorkspaceIds?: boolean;
  /** The `--workspace-id` flag; `input.workspaceId` must equal it. */
  workspaceId?: string;
}

export async function readLifecycleRequest(stdin: Readable, opts: LifecycleInputOptions): Promise<LifecycleRequest> {
  const text = await readAll(stdin, MAX_REQUEST_BYTES, STDIN_TIMEOUT_MS);
  return checkLifecycleRequest(text, opts);
}

/** The checks of `readLifecycleRequest` on an already-read request text. */
export function checkLifecycleRequest(text: string, opts: LifecycleInputOptions): LifecycleRequest {
  const value = parseRequestJson(text);
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    // Version first, as Paseo does, so a v2 request is named as such rather than as a schema error.
    const version = (value as Record<string, unknown>).protocolVersion;
    if (version !== 1) {
      const shown = typeof version === "string" ? JSON.stringify(version) : String(version);
      throw new RuntimeError("input", `unsupported protocol version ${shown}; expected 1`);
    }
  }
  const request = validateMessage(LifecycleRequestSchema, value, "Invalid lifecycle request: ");
  if (!RUNTIME_INSTANCE_ID.test(request.runtimeInstanceId)) {
    throw new RuntimeError("input", "Runtime instance id must be a SHA-256 identity");
  }
  if (opts.requireInput && !request.input) {
    throw new RuntimeError("input", `${opts.operation} input is required`);
  }
  if (request.input && opts.workspaceId !== undefined && request.input.workspaceId !== opts.workspaceId) {
    throw new RuntimeError(
      "input",
      `${opts.operation} input.workspaceId ${JSON.stringify(request.input.workspaceId)} does not match --workspace-id ${JSON.stringify(opts.workspaceId)}`,
    );
  }
  if (opts.requireWorkspaceIds && !request.workspaceIds) {
    throw new RuntimeError(
      "input",
      `${opts.operation} needs workspaceIds in the request; refusing to treat every owned workspace as an orphan`,
    );
  }
  return request;
}

function parseRequestJson(text: string): unknown {
  if (text.trim() === "") throw new RuntimeError("input", "Invalid request JSON: stdin was empty");
  try {
    return parseJsonText(text);
  } catch (err) {
    if (err instanceof SyntaxError) throw new RuntimeError("input", `Invalid request JSON: ${err.message}`);
    throw err;
  }
}

/** Reads a stream to EOF, refusing more than `maxBytes` and giving up after `timeoutMs`. */
export function readAll(stream: Readable, maxBytes: number, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (err: Error | undefined, text?: string) => {
      clearTimeout(timer);
      stream.off("data", onData).off("end", onEnd).off("error", onError);
      if (err) {
        stream.destroy();
        reject(err);
      } else {
        resolve(text as string);
      }
    };
    const onData = (chunk: Buffer | string) => {
      const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      size += buf.length;
      if (size > maxBytes) {
        finish(new RuntimeError("input", `Request on stdin is larger than ${maxBytes / 1024 / 1024} MiB`));
        return;
      }
      chunks.push(buf);
    };
    const onEnd = () => {
      // Fatal, unlike the frame decoders: a replaced byte in `root` would name another directory.
      let text: string;
      try {
        text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(Buffer.concat(chunks));
      } catch {
        finish(new RuntimeError("input", "Invalid request JSON: stdin is not valid UTF-8"));
        return;
      }
      finish(undefined, text);
    };
    const onError = (err: Error) => finish(new RuntimeError("input", `Cannot read the request from stdin: ${err.message}`));
    const timer = setTimeout(
      () => finish(new RuntimeError("input", `Timed out after ${timeoutMs / 1000} s waiting for the request on stdin to end`)),
      timeoutMs,
    );
    stream.on("data", onData).on("end", onEnd).on("error", onError);
  });
}
