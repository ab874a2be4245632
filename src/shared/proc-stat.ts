// Reads facts about host processes: state, group, session, start time and the descriptor tag.
// Identity checks (pid + start time) and the workspace process set are built on these, so every
// read tolerates a process vanishing mid-scan. Linux uses /proc; macOS is best effort via ps.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

export interface ProcStat {
  pid: number;
  /** One-letter kernel state (R, S, D, T, t, Z, …). */
  state: string;
  ppid: number;
  pgid: number;
  sid: number;
  /** Start time in clock ticks since boot (Linux stat field 22) or `ps lstart` text (macOS). */
  startTime: string;
}

const IS_LINUX = process.platform === "linux";

/** Parses /proc/<pid>/stat; fields after the parenthesised command name are space separated. */
export function parseProcStat(pid: number, text: string): ProcStat | null {
  const close = text.lastIndexOf(")");
  if (close < 0) return null;
  // Field 3 (state) is the first after ")"; field 22 (starttime) is index 19 from there.
  const f = text.slice(close + 2).split(" ");
  if (f.length < 20) return null;
  return { pid, state: f[0]!, ppid: Number(f[1]), pgid: Number(f[2]), sid: Number(f[3]), startTime: f[19]! };
}

export function readProcStat(pid: number): ProcStat | null {
  if (IS_LINUX) {
    try {
      return parseProcStat(pid, readFileSync(`/proc/${pid}/stat`, "utf8"));
    } catch {
      return null;
    }
  }
  return viaPs.readProcStat(pid);
}

/**
 * The same reads where there is no /proc (macOS, the BSDs): POSIX `ps` with only the options macOS
 * and procps share. Exported so tests run this path on Linux too, against /proc.
 */
export const viaPs = {
  readProcStat: (pid: number): ProcStat | null => psRows(["-p", String(pid)])[0] ?? null,
  listPids: (): number[] => psRows(["-A"]).map((r) => r.pid),
  isGone: (pid: number, startTime?: string): boolean => goneBy(viaPs.readProcStat(pid), startTime),
  readArgv(pid: number): string[] {
    try {
      const line = execFileSync("ps", ["-o", "command=", "-p", String(pid)], { encoding: "utf8", timeout: 2000 }).trim();
      return line ? [line] : [];
    } catch {
      return [];
    }
  },
};

/**
 * Whether `signo` waits to be delivered to `pid` (pending for the process or its main thread, and
 * not blocked). Linux only: false elsewhere or when the process is gone.
 */
export function signalPending(pid: number, signo: number): boolean {
  if (!IS_LINUX) return false;
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return false;
  }
  const bit = 1n << BigInt(signo - 1);
  const mask = (key: string) => BigInt("0x" + (new RegExp(`^${key}:\\s*([0-9a-f]+)`, "m").exec(text)?.[1] ?? "0"));
  return ((mask("SigPnd") | mask("ShdPnd")) & bit) !== 0n && (mask("SigBlk") & bit) === 0n;
}

/** The foreground process group of the terminal `pid` is attached to (stat field 8); null without one. */
export function terminalForegroundGroup(pid: number): number | null {
  if (!IS_LINUX) return null;
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const tpgid = Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[5]);
    return tpgid > 0 ? tpgid : null;
  } catch {
    return null;
  }
}

/** Every pid on the host (Linux: /proc entries; macOS: ps). */
export function listPids(): number[] {
  if (!IS_LINUX) return viaPs.listPids();
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    const n = Number(name);
    if (Number.isInteger(n) && n > 0) pids.push(n);
  }
  return pids;
}

/** The command line as argv (empty when unreadable or a zombie). */
export function readArgv(pid: number): string[] {
  if (IS_LINUX) {
    try {
      const raw = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      return raw.split("\0").filter((s, i, a) => !(i === a.length - 1 && s === ""));
    } catch {
      return [];
    }
  }
  return viaPs.readArgv(pid);
}

/** True when `pid` no longer runs the process identified by `startTime` (gone, reaped or a zombie). */
export function isGone(pid: number, startTime?: string): boolean {
  return goneBy(readProcStat(pid), startTime);
}

function goneBy(st: ProcStat | null, startTime: string | undefined): boolean {
  if (!st || st.state === "Z" || st.state === "X") return true;
  return startTime !== undefined && st.startTime !== startTime;
}

/** Sends a signal, ignoring processes that are already gone. Returns false if it did not exist. */
export function sendSignal(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ESRCH") return false;
    throw err;
  }
}

function psRows(select: string[]): ProcStat[] {
  let out: string;
  try {
    out = execFileSync("ps", [...select, "-o", "pid=,ppid=,pgid=,stat=,lstart="], { encoding: "utf8", timeout: 5000 });
  } catch {
    return [];
  }
  const rows: ProcStat[] = [];
  for (const line of out.split("\n")) {
    const m = /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(.*\S)\s*$/.exec(line);
    if (!m) continue;
    // macOS has no session ids in ps; the process group stands in for the session.
    rows.push({ pid: Number(m[1]), ppid: Number(m[2]), pgid: Number(m[3]), sid: Number(m[3]), state: m[4]![0]!, startTime: m[5]! });
  }
  return rows;
}
