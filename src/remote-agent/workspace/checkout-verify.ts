// Proves a fresh checkout is complete before a workspace is called ready. Git's parallel checkout
// (2.39 at least) reports a file it could not write, e.g. on a full disk, on stderr and still exits
// 0 with the file missing: such a workspace would read as "all files deleted", and a commit there
// would carry the deletions home. Checking every index entry against the disk is one lstat per
// file (tens of milliseconds for thousands), unlike `git diff`, which may re-hash them all.
import { lstatSync } from "node:fs";
import { join } from "node:path";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import { git } from "../../shared/git-exec.js";
import { formatBytes, isNoSpace, ranOutOfSpace } from "../../shared/disk-space.js";
import { diskInfo } from "./disk.js";

interface Entry {
  mode: string;
  path: string;
}

async function indexEntries(checkout: string): Promise<Entry[]> {
  // "<mode> <object> <stage>\t<path>\0"
  const out = await git(["ls-files", "--stage", "-z"], { cwd: checkout, timeoutMs: 600_000 });
  return out
    .split("\0")
    .filter(Boolean)
    .map((line) => ({ mode: line.slice(0, line.indexOf(" ")), path: line.slice(line.indexOf("\t") + 1) }));
}

function present(checkout: string, e: Entry): boolean {
  try {
    const st = lstatSync(join(checkout, e.path));
    if (e.mode === "120000") return st.isSymbolicLink();
    if (e.mode === "160000") return st.isDirectory(); // submodules stay empty directories
    return st.isFile();
  } catch {
    return false;
  }
}

/**
 * Throws unless every file the index lists exists with its type and git reported no error.
 * `stderr` is what the checkout command printed. Git does not say why a parallel write failed,
 * so the line names the disk and what is free on it; a full disk shows as nearly nothing free.
 */
export async function verifyCheckout(checkout: string, stderr: string, diskPath: string): Promise<void> {
  const entries = await indexEntries(checkout);
  const missing = entries.filter((e) => !present(checkout, e));
  const complaint = stderr.split("\n").find((l) => /^(error|fatal):/.test(l)) ?? "";
  if (missing.length === 0 && complaint === "") return;
  const what =
    missing.length > 0
      ? `${missing.length} of ${entries.length} files could not be written (${missing[0]!.path}${missing.length > 1 ? ", …" : ""})`
      : oneLine(complaint).slice(0, 300);
  const disk = diskInfo(diskPath);
  if (isNoSpace(stderr)) throw ranOutOfSpace(disk, "during checkout", what);
  throw new RuntimeError(
    "remote",
    `Checkout incomplete on the remote host: ${what}; the disk at ${disk.mount} has ${formatBytes(disk.freeBytes)} free`,
  );
}
