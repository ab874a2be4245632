// Disk space on the remote host, in terms both sides share: how much a checkout of a commit takes
// (from the tree, before anything is written), and the one-line errors a full disk turns into.
// The runtime uses it to refuse a first transfer that cannot fit; the agent before every checkout.
import { RuntimeError } from "./errors.js";
import { gitRecords } from "./git-exec.js";
import { isNumber, isString, nullable, object, type Infer } from "./guards.js";

/** Free space of the filesystem holding the remote root, as the agent measured it. */
export const DiskInfo = object({
  /** Mount point of that filesystem (the path itself where mounts cannot be read). */
  mount: isString,
  freeBytes: isNumber,
  /** Free inodes, or null where the filesystem does not count them. */
  freeFiles: nullable(isNumber),
  blockSize: isNumber,
});
export type DiskInfo = Infer<typeof DiskInfo>;

export interface Footprint {
  bytes: number;
  files: number;
}

/** Files a fresh clone writes besides the tree (config, HEAD, sample hooks, logs), generously. */
const CLONE_OVERHEAD: Footprint = { bytes: 512 * 1024, files: 64 };

export function formatBytes(n: number): string {
  if (n < 1024 * 1024) return `${Math.round(n / 1024)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(1)} GiB`;
}

const roundUp = (n: number, block: number) => Math.ceil(n / block) * block;

/**
 * What checking out `commit` writes: every blob rounded up to whole blocks, one block per
 * directory, the index (~70 bytes + path per entry) and a clone's own files. Read from the tree
 * with `git ls-tree -r -l` (object headers only), streamed so a huge tree never sits in memory.
 */
export async function checkoutFootprint(repo: string, commit: string, blockSize: number, env?: Record<string, string>): Promise<Footprint> {
  const block = blockSize > 0 ? blockSize : 4096;
  // Directories are counted as the sorted listing leaves them (a new one is a path prefix not seen
  // just before): no set of every directory, whose size would grow with the tree.
  let dirs = 0;
  let open: string[] = [];
  let bytes = 0;
  let files = 0;
  const take = (entry: string) => {
    // "<mode> <type> <object> <size>\t<path>"; size is "-" for submodule commits.
    const tab = entry.indexOf("\t");
    if (tab < 0) return;
    const [, type, , size] = entry.slice(0, tab).split(/ +/);
    const path = entry.slice(tab + 1);
    files++;
    bytes += (type === "blob" ? roundUp(Number(size) || 0, block) : block) + 70 + path.length;
    const parts = path.split("/").slice(0, -1);
    let same = 0;
    while (same < parts.length && same < open.length && parts[same] === open[same]) same++;
    dirs += parts.length - same;
    open = parts;
  };
  await gitRecords(["ls-tree", "-r", "-l", "-z", "--full-tree", commit], { cwd: repo, ...(env ? { env } : {}) }, take);
  return { bytes: bytes + dirs * block + CLONE_OVERHEAD.bytes, files: files + dirs + CLONE_OVERHEAD.files };
}

/** Room kept free beyond the estimate: it is an estimate, and the host needs some space to work. */
export function withMargin(need: number): number {
  return Math.ceil(need * 1.05) + 1024 * 1024;
}

const NOT_ENOUGH = "Not enough disk space on the remote host";
const RAN_OUT = "The remote host ran out of disk space";

/** Whether `err` already is one of the lines below (so it is not explained twice). */
export function isDiskReport(err: unknown): boolean {
  return err instanceof RuntimeError && (err.code === "disk-short" || err.code === "disk-ran-out");
}

/** Refuses early, before writing, when `need` does not fit on the disk `disk` describes. */
export function requireSpace(disk: DiskInfo, need: Footprint, what: string): void {
  const short = disk.freeBytes < withMargin(need.bytes);
  const noInodes = disk.freeFiles !== null && disk.freeFiles < need.files + 1000;
  if (!short && !noInodes) return;
  const have = noInodes && !short ? `${disk.freeFiles} free inodes` : `${formatBytes(disk.freeBytes)} free`;
  const want = noInodes && !short ? `${need.files} files` : `about ${formatBytes(need.bytes)}`;
  throw new RuntimeError("remote", `${NOT_ENOUGH}: the disk at ${disk.mount} has ${have}; ${what} needs ${want}`, { code: "disk-short" });
}

/** A disk that filled up part-way (git's or Node's ENOSPC), named with what is left on it. */
export function ranOutOfSpace(disk: DiskInfo, during: string, detail = ""): RuntimeError {
  return new RuntimeError(
    "remote",
    `${RAN_OUT} ${during}: the disk at ${disk.mount} has ${formatBytes(disk.freeBytes)} free${detail ? `; ${detail}` : ""}`,
    { code: "disk-ran-out" },
  );
}

/** Whether an error (Node's errno, or git's and the filesystem's text) says the disk is full. */
export function isNoSpace(err: unknown): boolean {
  if ((err as NodeJS.ErrnoException | null)?.code === "ENOSPC" || (err as NodeJS.ErrnoException | null)?.code === "EDQUOT") return true;
  const text = err instanceof Error ? err.message : String(err);
  return /No space left on device|Out of diskspace|Disk quota exceeded|ENOSPC/i.test(text);
}
