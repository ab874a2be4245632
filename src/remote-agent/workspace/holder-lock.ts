// Lock files that name their holder (pid + start time, and a token per acquisition): whoever finds
// one can tell a live holder from one that was killed, so a dead agent's lock is taken over instead
// of blocking forever. The host daemon runs many operations in one process, so "held by us" means
// held by an operation of this process that has not released it (its token is still held here).
// Used for a workspace being created and for a project cache being pruned.
import { linkSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { isGone, readProcStat } from "../../shared/proc-stat.js";

interface LockHolder {
  pid: number;
  startTime: string;
  token?: string;
}

/** Tokens of the locks operations of this process hold right now. */
const heldHere = new Set<string>();

function readHolder(path: string): LockHolder | null {
  try {
    const h = JSON.parse(readFileSync(path, "utf8")) as Partial<LockHolder>;
    if (typeof h.pid !== "number" || typeof h.startTime !== "string") return null;
    return { pid: h.pid, startTime: h.startTime, ...(typeof h.token === "string" ? { token: h.token } : {}) };
  } catch {
    return null;
  }
}

/**
 * Whether the lock at `path` is held by someone else: another live process, or another operation
 * of this one that has not released it.
 */
export function heldByOther(path: string): boolean {
  const h = readHolder(path);
  if (h === null) return false;
  if (h.pid === process.pid) return h.token !== undefined && heldHere.has(h.token);
  return !isGone(h.pid, h.startTime);
}

/**
 * Takes the lock at `path` (a stale one is taken over) and returns its release function, or null
 * while another live process holds it. The file is written aside and hard-linked into place, so
 * nobody ever reads a half-written lock as stale, and a failed write (a full disk) leaves none.
 */
export function tryLock(path: string): (() => void) | null {
  const token = randomBytes(8).toString("hex");
  const me: LockHolder = { pid: process.pid, startTime: readProcStat(process.pid)?.startTime ?? "", token };
  const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    writeFileSync(tmp, JSON.stringify(me), { flag: "wx", mode: 0o600 });
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        linkSync(tmp, path);
        heldHere.add(token);
        return () => {
          heldHere.delete(token);
          const h = readHolder(path);
          if (h?.pid === me.pid && h.token === token) rmSync(path, { force: true });
        };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        if (heldByOther(path)) return null;
        rmSync(path, { force: true });
      }
    }
    return null;
  } finally {
    rmSync(tmp, { force: true });
  }
}
