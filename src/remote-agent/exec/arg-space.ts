// What execve(2) on this host accepts for a workload's argv and env, checked before launch so an
// envelope the kernel would refuse fails as one clear input error (and is recorded as refused)
// instead of a spawn failure after `started`.
//
// Linux (fs/exec.c): every string, NUL included, may hold at most MAX_ARG_STRLEN (32 pages); all
// of them together (the file name, argv and "NAME=value" env strings, each with its NUL) plus one
// pointer per string must fit in a quarter of the stack limit, capped at 3/4 of 8 MiB and never
// below 32 pages. macOS: kern.argmax (1 MiB) for the same total. Elsewhere execve decides.
import { readFileSync } from "node:fs";
import { RuntimeError } from "../../shared/errors.js";
import type { Launch } from "./launch.js";

const PAGE = 4096;
const LINUX_MAX_ARG_STRLEN = 32 * PAGE;
const LINUX_STACK_CAP = ((8 * 1024 * 1024) / 4) * 3;
const DARWIN_ARG_MAX = 1024 * 1024;
const POINTER = 8;

export interface ArgSpace {
  /** Bytes of strings plus pointers execve accepts, or null when unknown. */
  total: number | null;
  /** Bytes (NUL included) one string may take, or null when there is no separate bound. */
  perString: number | null;
}

/** Soft stack limit of this process (inherited by the workload), or null when unlimited/unknown. */
function stackLimit(): number | null {
  try {
    const m = /^Max stack size\s+(\S+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    return m && /^\d+$/.test(m[1]!) ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

export function hostArgSpace(platform: NodeJS.Platform = process.platform): ArgSpace {
  if (platform === "linux") {
    const stack = stackLimit();
    const quarter = stack === null ? LINUX_STACK_CAP : Math.min(LINUX_STACK_CAP, Math.floor(stack / 4));
    return { total: Math.max(quarter, 32 * PAGE), perString: LINUX_MAX_ARG_STRLEN };
  }
  if (platform === "darwin") return { total: DARWIN_ARG_MAX, perString: null };
  return { total: null, perString: null };
}

function refuse(message: string): RuntimeError {
  return new RuntimeError("input", `Invalid spawn envelope: ${message}`);
}

/** Throws the input error execve's E2BIG would have become, naming the limit. */
export function checkArgSpace(launch: Launch, env: Record<string, string>, space: ArgSpace = hostArgSpace()): void {
  const argv = [launch.argv0, ...launch.args];
  const strings: Array<{ what: string; bytes: number }> = [
    ...argv.map((a, i) => ({ what: `argv[${i}]`, bytes: Buffer.byteLength(a) + 1 })),
    ...Object.entries(env).map(([k, v]) => ({ what: `env ${k}`, bytes: Buffer.byteLength(k) + Buffer.byteLength(v) + 2 })),
  ];
  if (space.perString !== null) {
    const long = strings.find((s) => s.bytes > space.perString!);
    if (long) {
      throw refuse(
        `${long.what} takes ${long.bytes} bytes, more than the ${space.perString} bytes execve accepts for one string on this host (MAX_ARG_STRLEN)`,
      );
    }
  }
  if (space.total === null) return;
  const need = Buffer.byteLength(launch.file) + 1 + strings.reduce((n, s) => n + s.bytes, 0) + strings.length * POINTER;
  if (need > space.total) {
    throw refuse(`argv and env need ${need} bytes, more than the ${space.total} bytes execve accepts on this host (ARG_MAX)`);
  }
}
