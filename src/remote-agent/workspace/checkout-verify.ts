// Proves a fresh checkout is complete before a workspace is called ready. Git's parallel checkout
// (2.39 at least) reports a file it could not write, e.g. on a full disk, on stderr and still exits
// 0 with the file missing: such a workspace would read as "all files deleted", and a commit there
// would carry the deletions home. Checking every index entry against the disk is one lstat per
// file (tens of milliseconds for thousands), unlike `git diff`, which may re-hash them all.
// Entries are checked as git lists them, so the daemon's memory does not grow with the file count.
import { lstatSync } from "node:fs";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import { gitRecordBytes } from "../../shared/git-exec.js";
import { formatBytes, isNoSpace, ranOutOfSpace } from "../../shared/disk-space.js";
import { diskInfo } from "./disk.js";

/** `dir`/`rel` as bytes: an index path is bytes, and one that is not UTF-8 must stay as it is. */
export function entryPath(dir: string, rel: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${dir}/`), rel]);
}

/** Whether the file an index entry names (`mode` as git writes it, octal text) is on disk with its type. */
export function present(path: Buffer, mode: string): boolean {
  try {
    const st = lstatSync(path);
    if (mode === "120000") return st.isSymbolicLink();
    if (mode === "160000") return st.isDirectory(); // submodules stay empty directories
    return st.isFile();
  } catch {
    return false;
  }
}

/** What a check found: how many entries, how many missing, the first missing path. */
export interface Tally {
  total: number;
  missing: number;
  first: string;
}

/**
 * The index's entries checked as they stream out of `git ls-files` (never all in memory: a
 * checkout of 200,000 files listed at once held tens of megabytes in the host daemon).
 */
async function tallyIndex(checkout: string): Promise<Tally> {
  // "<mode> <object> <stage>\t<path>\0"
  const tally: Tally = { total: 0, missing: 0, first: "" };
  await gitRecordBytes(["ls-files", "--stage", "-z"], { cwd: checkout, timeoutMs: 600_000 }, (line) => {
    if (line.length === 0) return;
    const path = line.subarray(line.indexOf(0x09) + 1);
    tally.total++;
    if (present(entryPath(checkout, path), line.subarray(0, line.indexOf(0x20)).toString("latin1"))) return;
    if (tally.missing++ === 0) tally.first = path.toString("utf8");
  });
  return tally;
}

/**
 * Throws unless every file the index lists exists with its type and git reported no error.
 * `stderr` is what the checkout command printed. Git does not say why a parallel write failed,
 * so the line names the disk and what is free on it; a full disk shows as nearly nothing free.
 */
export async function verifyCheckout(checkout: string, stderr: string, diskPath: string): Promise<void> {
  requireComplete(await tallyIndex(checkout), stderr, diskPath);
}

/** Throws the one-line failure of a checkout that `tally` or git's `stderr` found incomplete. */
export function requireComplete(tally: Tally, stderr: string, diskPath: string): void {
  const complaint = stderr.split("\n").find((l) => /^(error|fatal):/.test(l)) ?? "";
  if (tally.missing === 0 && complaint === "") return;
  const what =
    tally.missing > 0
      ? `${tally.missing} of ${tally.total} files could not be written (${tally.first}${tally.missing > 1 ? ", …" : ""})`
      : oneLine(complaint).slice(0, 300);
  const disk = diskInfo(diskPath);
  if (isNoSpace(stderr)) throw ranOutOfSpace(disk, "during checkout", what);
  throw new RuntimeError(
    "remote",
    `Checkout incomplete on the remote host: ${what}; the disk at ${disk.mount} has ${formatBytes(disk.freeBytes)} free`,
  );
}
