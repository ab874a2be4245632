// What the tests see of processes on the (local) remote host through /proc, as root: command
// lines, working directories, and waiting for a process to appear. Linux only.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";

export interface HostProcess {
  pid: number;
  argv: string[];
  cwd: string | null;
}

function readOr<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback; // the process ended mid-scan
  }
}

/** Every process visible now, with its argv (empty for kernel threads) and working directory. */
export function hostProcesses(): HostProcess[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .map((n) => ({
      pid: Number(n),
      argv: readOr(() => readFileSync(`/proc/${n}/cmdline`, "utf8").split("\0").filter(Boolean), [] as string[]),
      cwd: readOr(() => readlinkSync(`/proc/${n}/cwd`), null as string | null),
    }));
}

/**
 * The runtime's host daemon (`agent.cjs daemon`, cwd `<root>/run`) or the relay that carries a
 * connection's link to it where the server forwards no Unix sockets (`agent.cjs relay`: the
 * embedded server): long-lived by design, living as long as the daemon or the connection, never
 * one operation's leftover.
 */
export function isHostDaemon(p: HostProcess): boolean {
  return p.argv[1]?.endsWith("/agent.cjs") === true && (p.argv[2] === "daemon" || p.argv[2] === "relay");
}

/** Polls (every 5 ms, bounded) until a process matches; resolves with it. */
export async function waitForProcess(match: (p: HostProcess) => boolean, ms = 30_000): Promise<HostProcess> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = hostProcesses().find(match);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no matching process appeared within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
