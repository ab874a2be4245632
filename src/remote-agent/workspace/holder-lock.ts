// Lock files that name their holder (pid + start time): whoever finds one can tell a live holder
// from one that was killed, so a dead agent's lock is taken over instead of blocking forever.
// Used for a workspace being created and for a project cache being pruned.
import { linkSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { isGone, readProcStat } from "../../shared/proc-stat.js";

interface LockHolder {
  pid: number;
  startTime: string;
}

function readHolder(path: string): LockHolder | null {
  try {
    const h = JSON.parse(readFileSync(path, "utf8")) as Partial<LockHolder>;
    return typeof h.pid === "number" && typeof h.startTime === "string" ? { pid: h.pid, startTime: h.startTime } : null;
  } catch {
    return null;
  }
}

/** Whether another live process holds the lock at `path`. */
export function heldByOther(path: string): boolean {
  const h = readHolder(path);
  return h !== null && h.pid !== process.pid && !isGone(h.pid, h.startTime);
}

/**
 * Takes the lock at `path` (a stale one is taken over) and returns its release function, or null
 * while another live process holds it. The file is written aside and hard-linked into place, so
 * nobody ever reads a half-written lock as stale, and a failed write (a full disk) leaves none.
 */
export function tryLock(path: string): (() => void) | null {
  const me: LockHolder = { pid: process.pid, startTime: readProcStat(process.pid)?.startTime ?? "" };
  const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    writeFileSync(tmp, JSON.stringify(me), { flag: "wx", mode: 0o600 });
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        linkSync(tmp, path);
        return () => {
          if (readHolder(path)?.pid === me.pid) rmSync(path, { force: true });
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
