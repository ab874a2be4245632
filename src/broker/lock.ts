// A short critical section between processes of one user: mkdir is atomic, so whoever creates the
// lock directory holds it. A holder that crashed leaves it behind; it counts as stale after
// STALE_LOCK_MS, far longer than any holder keeps it (a probe and an unlink).
import { mkdirSync, rmSync, statSync } from "node:fs";
import { RuntimeError } from "../shared/errors.js";
import { sleep } from "../shared/async.js";

const STALE_LOCK_MS = 10_000;
const LOCK_WAIT_MS = 15_000;

export async function withLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const until = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      mkdirSync(path, { mode: 0o700 });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      try {
        if (Date.now() - statSync(path).mtimeMs > STALE_LOCK_MS) rmSync(path, { recursive: true, force: true });
      } catch {
        // Released meanwhile: retry at once.
      }
      if (Date.now() > until) throw new RuntimeError("network", `broker lock ${path} stayed held for ${LOCK_WAIT_MS} ms`);
      await sleep(15);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(path, { recursive: true, force: true });
  }
}
