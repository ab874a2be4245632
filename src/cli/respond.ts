// Writes an operation's single stdout value (contract §5): validated, canonical bytes, one line.
import type { Writable } from "node:stream";

const DESCRIBE_BYTES = '{"protocolVersion":1,"modes":["pipes","pty"],"reconcile":true}\n';

/** Resolves once the bytes are handed to the OS, so the dispatcher may exit right after. */
export function writeBytes(stdout: Writable, bytes: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    stdout.write(bytes, (err) => (err ? reject(err) : resolve()));
  });
}

export function writeDescribe(stdout: Writable): Promise<void> {
  return writeBytes(stdout, DESCRIBE_BYTES);
}
