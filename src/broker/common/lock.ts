// A short critical section between processes of one user (a probe of the broker socket and an
// unlink). The lock is a file holding its holder's pid and a random token, put in place with
// link(2), which fails atomically when the name exists. A lock is stale when its holder died or
// held it far longer than any holder does (STALE_LOCK_MS); only then may another process remove
// it. Two processes can judge the same stale lock at once, and one of them may already have
// replaced it by its own fresh lock by the time the other acts: so removal happens only inside a
// second, tiny lock (`<lock>.break`), after re-reading that the lock there is still the stale one.
import { linkSync, readFileSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { RuntimeError } from "../../shared/errors.js";
import { sleep } from "../../shared/async.js";
import { randomHex } from "../../shared/random.js";

const STALE_LOCK_MS = 10_000;
const LOCK_WAIT_MS = 15_000;
const POLL_MS = 15;

export interface LockHooks {
  /** Test seam: runs after this process judged the lock stale and before it acts on that. */
  afterJudgedStale?: () => Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The holder's token, or null when the lock is gone. */
function readToken(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

function isStale(path: string, token: string): boolean {
  const pid = Number(token.split(" ")[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return true;
  try {
    return Date.now() - statSync(path).mtimeMs > STALE_LOCK_MS;
  } catch {
    return false; // released meanwhile
  }
}

/** Removes `path` if it still holds `token` (our own lock, or a stale one we judged). */
function removeIfHeldBy(path: string, token: string): boolean {
  if (readToken(path) !== token) return false;
  unlinkSync(path);
  return true;
}

function tryLink(from: string, to: string): boolean {
  try {
    linkSync(from, to);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
}

/**
 * Removes the lock at `path` if it is still the stale one holding `staleToken`. Breakers take
 * turns through `<path>.break`, held only for a read and an unlink; a breaker that died there is
 * itself recognised by its dead pid (or age).
 */
function breakStale(path: string, staleToken: string, mine: string, myToken: string): boolean {
  const breaker = `${path}.break`;
  if (!tryLink(mine, breaker)) {
    const other = readToken(breaker);
    if (other !== null && isStale(breaker, other)) removeIfHeldBy(breaker, other);
    return false;
  }
  try {
    return removeIfHeldBy(path, staleToken);
  } finally {
    removeIfHeldBy(breaker, myToken);
  }
}

export async function withLock<T>(path: string, fn: () => Promise<T>, hooks: LockHooks = {}): Promise<T> {
  const token = `${process.pid} ${randomHex(8)}\n`;
  const mine = `${path}.${randomHex(6)}.tmp`;
  writeFileSync(mine, token, { mode: 0o600, flag: "wx" });
  try {
    const until = Date.now() + LOCK_WAIT_MS;
    while (!tryLink(mine, path)) {
      const held = readToken(path);
      if (held !== null && isStale(path, held)) {
        await hooks.afterJudgedStale?.();
        if (breakStale(path, held, mine, token)) continue;
      } else if (held === null) continue; // released meanwhile: retry at once
      if (Date.now() > until) throw new RuntimeError("network", `broker lock ${path} stayed held for ${LOCK_WAIT_MS} ms`);
      await sleep(POLL_MS);
    }
  } finally {
    unlinkSync(mine);
  }
  try {
    return await fn();
  } finally {
    removeIfHeldBy(path, token);
  }
}
