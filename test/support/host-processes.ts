// What the tests see of processes on the remote host (through host-view.ts: this machine's /proc
// on the local rig, the container's processes for the compose host): command lines, working
// directories, and waiting for a process to appear. Linux only.
import { requireView, type HostProcess } from "./host-view.js";

export type { HostProcess };

/** Every process visible now on the host, with its argv (empty for kernel threads) and working directory. */
export function hostProcesses(): HostProcess[] {
  return requireView().processes();
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
