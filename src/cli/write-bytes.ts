// Hands bytes to an output stream and resolves once they are written: the dispatcher exits right
// after an operation returns, so nothing may still be queued. Schema-free, for `describe`.
import { writeSync } from "node:fs";
import type { Writable } from "node:stream";

/** Resolves once the bytes are handed to the stream, so the dispatcher may exit right after. */
export function writeBytes(stdout: Writable, bytes: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    stdout.write(bytes, (err) => (err ? reject(err) : resolve()));
  });
}

/**
 * Writes short output straight to `fd` when there is one: process.stdout on a pipe costs node its
 * net and stream modules, more than `describe` does otherwise. A pipe takes a write of up to
 * PIPE_BUF bytes whole or not at all; should it refuse (a non-blocking pipe that is full), the
 * bytes go through the stream as usual.
 */
export async function writeShort(io: { stdout: Writable; stdoutFd?: number }, bytes: string): Promise<void> {
  if (io.stdoutFd !== undefined && Buffer.byteLength(bytes) <= 512) {
    try {
      writeSync(io.stdoutFd, bytes);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EAGAIN") throw err;
    }
  }
  await writeBytes(io.stdout, bytes);
}
