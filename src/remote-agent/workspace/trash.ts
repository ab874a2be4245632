// Removing directory trees without stalling the host daemon. A workspace or spare is thousands of
// files: rmSync walked them on the daemon's one event loop (a 40,000-file destroy held every other
// workspace's output and a `signal` for seconds), and fs.promises.rm floods the thread pool and
// then runs its completions in bursts (540 ms without a timer tick, measured on the rig for 40k
// files). So a tree is first renamed into `<root>/tmp/trash-…` (atomic: it is gone under its real
// name at once and never half-deleted there) and then deleted by a child `rm -rf`, whose walk
// costs the daemon nothing. A trash entry that outlives its deleter (the agent was killed) is
// swept later: by the next discard here, or by reconcile.
import { spawn } from "node:child_process";
import { setPriority } from "node:os";
import { existsSync, mkdirSync, readdirSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import { rootLayout } from "../layout.js";

export const TRASH_PREFIX = "trash-";
/** A trash entry older than this that nobody here deletes is a killed agent's leftover. */
export const TRASH_STALE_MS = 60_000;
/** Bound of one deletion: a tree that takes longer is left in the trash for a later sweep. */
const DELETE_TIMEOUT_MS = 30 * 60_000;

/**
 * The deleter's nice value: the lowest CPU priority. A deletion is background work; the host's
 * other workspaces (their workloads, a `signal` with its 750 ms budget) go first.
 */
const DELETER_NICE = 19;

/** Trees this process is deleting now (a sweep leaves them alone). */
const deleting = new Set<string>();

function log(line: string): void {
  try {
    process.stderr.write(`${new Date().toISOString()} trash ${process.pid}: ${line}\n`);
  } catch {
    // a full disk loses the log line, nothing else
  }
}

/** Deletes `path` (a tree under the root) in a child process; resolves once it is gone. */
export function removeTree(path: string): Promise<void> {
  // Nothing there (a staging directory already renamed into place): no child to start.
  if (!existsSync(path)) return Promise.resolve();
  deleting.add(path);
  return new Promise<void>((resolve, reject) => {
    const child = spawn("rm", ["-rf", "--", path], { cwd: "/", stdio: ["ignore", "ignore", "pipe"], env: { PATH: "/usr/bin:/bin" } });
    if (child.pid !== undefined) {
      try {
        setPriority(child.pid, DELETER_NICE);
      } catch {
        // An OS that refuses it deletes at normal priority: slower for the rest, never wrong.
      }
    }
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-2000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), DELETE_TIMEOUT_MS);
    timer.unref();
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new RuntimeError("remote", `could not delete ${path}: ${oneLine(err.message)}`));
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      // Another deleter may have raced this one through the same tree: gone is gone.
      if (code === 0 || !existsSync(path)) return resolve();
      const why = oneLine(stderr) || (signal ? `rm ended by ${signal}` : `rm exited ${code}`);
      reject(new RuntimeError("remote", `could not delete ${path}: ${why}`));
    });
  }).finally(() => deleting.delete(path));
}

/**
 * Moves `path` into the root's trash; the trash entry, or null when there was nothing to move. A
 * path on another filesystem than the root's tmp cannot be renamed there: it is deleted in place.
 */
function moveToTrash(root: string, path: string, label: string): { trash: string } | { inPlace: string } | null {
  const tmp = rootLayout(root).tmpBase;
  mkdirSync(tmp, { recursive: true, mode: 0o700 });
  const trash = join(tmp, `${TRASH_PREFIX}${label}-${randomBytes(4).toString("hex")}`);
  try {
    renameSync(path, trash);
    return { trash };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return null;
    if (code === "EXDEV") return { inPlace: path };
    throw err;
  }
}

/** Removes the tree at `path`: gone under its name at once, its files deleted before this resolves. */
export async function discardTree(root: string, path: string, label: string): Promise<void> {
  const moved = moveToTrash(root, path, label);
  if (!moved) return;
  await removeTree("trash" in moved ? moved.trash : moved.inPlace);
  sweepStaleTrash(root);
}

/** As discardTree, but its files are deleted in the background (failures are logged, the sweep retries). */
export function discardTreeLater(root: string, path: string, label: string): void {
  const moved = moveToTrash(root, path, label);
  if (!moved) return;
  removeTree("trash" in moved ? moved.trash : moved.inPlace).then(
    () => sweepStaleTrash(root),
    (err: Error) => log(err.message),
  );
}

/** The entries of `<root>/tmp` that `stale(name, path)` picks and no deletion here is working on. */
export function staleEntries(root: string, stale: (name: string, path: string) => boolean): string[] {
  const tmp = rootLayout(root).tmpBase;
  let names: string[];
  try {
    names = readdirSync(tmp);
  } catch {
    return [];
  }
  return names
    .map((n) => ({ n, p: join(tmp, n) }))
    .filter(({ n, p }) => !deleting.has(p) && stale(n, p))
    .map(({ p }) => p);
}

export function olderThan(path: string, ms: number): boolean {
  try {
    return Date.now() - statSync(path).mtimeMs > ms;
  } catch {
    return false;
  }
}

/** A trash entry moved there over TRASH_STALE_MS ago (the rename set its ctime; its mtime may be years old). */
function staleTrash(name: string, path: string): boolean {
  if (!name.startsWith(TRASH_PREFIX)) return false;
  try {
    return Date.now() - statSync(path).ctimeMs > TRASH_STALE_MS;
  } catch {
    return false;
  }
}

/** Deletes, in the background, trash that killed agents left behind. */
function sweepStaleTrash(root: string): void {
  void pruneTmp(root, () => false);
}

/**
 * Deletes stale trash and whatever else `stale` picks in `<root>/tmp` (reconcile), one tree after
 * the other, off the event loop; a tree that cannot be deleted is logged and left for next time.
 */
export async function pruneTmp(root: string, stale: (name: string, path: string) => boolean): Promise<void> {
  for (const p of staleEntries(root, (n, path) => staleTrash(n, path) || stale(n, path))) {
    await removeTree(p).catch((err: Error) => log(err.message));
  }
}
