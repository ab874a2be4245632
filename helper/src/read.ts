// fs-read (docs/contract.md#helper-commands): raw bytes to stdout, unframed and streamed with back-pressure. No SIGTERM
// handler anywhere: Paseo cancels a read by SIGTERM and expects death by that signal.
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { once } from "node:events";
import { NOT_A_FILE } from "./file-info.js";
import { resolveScoped } from "./scope.js";

const CHUNK_BYTES = 256 * 1024;

export async function readToStdout(root: string, rawPath: string | undefined): Promise<void> {
  const scoped = await resolveScoped(root, rawPath);
  // O_NOFOLLOW guards against a symlink swapped in after resolution; O_NONBLOCK keeps a FIFO
  // from blocking the open so it can be rejected as "not a file" (no effect on regular files).
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  const handle = await open(scoped.absolute, flags);
  try {
    if (!(await handle.stat()).isFile()) throw new Error(NOT_A_FILE);
    for (;;) {
      // A fresh buffer per chunk: stdout may still hold the previous one while it drains.
      const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
      const { bytesRead } = await handle.read(buffer, 0, CHUNK_BYTES, null);
      if (bytesRead === 0) break;
      if (!process.stdout.write(buffer.subarray(0, bytesRead))) await once(process.stdout, "drain");
    }
  } finally {
    await handle.close();
  }
}
