// Hands bytes to an output stream and resolves once they are written: the dispatcher exits right
// after an operation returns, so nothing may still be queued. Schema-free, for `describe`.
import type { Writable } from "node:stream";

/** Resolves once the bytes are handed to the stream, so the dispatcher may exit right after. */
export function writeBytes(stdout: Writable, bytes: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    stdout.write(bytes, (err) => (err ? reject(err) : resolve()));
  });
}
