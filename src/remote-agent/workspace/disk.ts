// Measures the disk under the remote root (statfs) and names it by its mount point, so a full disk
// is reported as "the disk at /home has 12 MiB free" rather than as git's raw write error.
import { readFileSync, realpathSync, statfsSync } from "node:fs";
import type { DiskInfo } from "../../shared/disk-space.js";
import { isDiskReport, isNoSpace, ranOutOfSpace } from "../../shared/disk-space.js";

function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** Longest mount point containing `path` (Linux /proc/self/mountinfo); `path` itself elsewhere. */
function mountPointOf(path: string): string {
  let real = path;
  try {
    real = realpathSync(path);
    const mounts = readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((l) => l.split(" ")[4])
      .filter((m): m is string => !!m)
      .map(unescapeMount);
    const inside = (m: string) => real === m || real.startsWith(m.endsWith("/") ? m : `${m}/`);
    return mounts.filter(inside).sort((a, b) => b.length - a.length)[0] ?? real;
  } catch {
    return real;
  }
}

export function diskInfo(path: string): DiskInfo {
  const st = statfsSync(path);
  return {
    mount: mountPointOf(path),
    freeBytes: st.bavail * st.bsize,
    freeFiles: st.files > 0 ? st.ffree : null,
    blockSize: st.bsize,
  };
}

/** Turns a disk-full failure into the one line naming the disk; other errors pass unchanged. */
export function explainNoSpace(err: unknown, path: string, during: string): unknown {
  if (isDiskReport(err) || !isNoSpace(err)) return err;
  try {
    return ranOutOfSpace(diskInfo(path), during);
  } catch {
    return err;
  }
}
