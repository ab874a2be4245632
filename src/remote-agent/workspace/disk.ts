// Measures the disk under the remote root (statfs, or `df` where node is older than 18.15) and
// names it by its mount point, so a full disk is reported as "the disk at /home has 12 MiB free"
// rather than as git's raw write error.
import { execFileSync } from "node:child_process";
import { readFileSync, realpathSync, statfsSync } from "node:fs";
import type { DiskInfo } from "../../shared/disk-space.js";
import { isDiskReport, isNoSpace, ranOutOfSpace } from "../../shared/disk-space.js";

function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** `df -Pk <path>`: free space and mount point (node before 18.15 has no statfs; macOS has no mountinfo). */
export function dfInfo(path: string): { freeBytes: number; mount: string } {
  const line = execFileSync("df", ["-Pk", path], { encoding: "utf8", timeout: 10_000 }).trim().split("\n").pop() ?? "";
  // "<filesystem> <blocks> <used> <available> <capacity>% <mount point, may contain spaces>"
  const m = /^.*?\s+\d+\s+\d+\s+(\d+)\s+\S+\s+(.+)$/.exec(line);
  if (!m) throw new Error(`unexpected df output: ${line}`);
  return { freeBytes: Number(m[1]) * 1024, mount: m[2]! };
}

/** Longest mount point containing `path` (Linux /proc/self/mountinfo); null where unreadable. */
function mountPointOf(path: string): string | null {
  try {
    const real = realpathSync(path);
    const mounts = readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((l) => l.split(" ")[4])
      .filter((m): m is string => !!m)
      .map(unescapeMount);
    const inside = (m: string) => real === m || real.startsWith(m.endsWith("/") ? m : `${m}/`);
    return mounts.filter(inside).sort((a, b) => b.length - a.length)[0] ?? null;
  } catch {
    return null;
  }
}

export function diskInfo(path: string): DiskInfo {
  if (typeof statfsSync !== "function") {
    const df = dfInfo(path);
    return { mount: df.mount, freeBytes: df.freeBytes, freeFiles: null, blockSize: 4096 };
  }
  const st = statfsSync(path);
  return {
    mount: mountPointOf(path) ?? dfInfo(path).mount,
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
