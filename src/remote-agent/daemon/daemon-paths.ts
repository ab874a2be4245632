// Where the host daemon of one agent build lives: everything in `<root>/run/` (0700), named by the
// agent's content hash so daemons of different builds never share a file. Sockets are bound and
// dialled relative to run/ (the daemon's and its starters' working directory), because a Unix
// socket path is limited to ~104 bytes and a configured root may be longer.
import { dirname, join } from "node:path";

export interface DaemonPaths {
  root: string;
  runDir: string;
  /** Content hash of this agent build (the name of its directory under `<root>/agent/`). */
  hash: string;
  agentFile: string;
  /** Names relative to runDir. */
  socket: string;
  pidFile: string;
  log: string;
}

const HASH = /^[0-9a-f]{16}$/;
export const DAEMON_SOCKET = /^d-([0-9a-f]{16})\.sock$/;

/** From the installed agent's own path, `<root>/agent/<hash>/agent.cjs`. */
export function daemonPaths(agentFile: string): DaemonPaths {
  const agentDir = dirname(agentFile);
  const hash = agentDir.slice(agentDir.lastIndexOf("/") + 1);
  if (!HASH.test(hash)) throw new Error(`the daemon runs only from an installed agent (<root>/agent/<hash>/), not ${agentFile}`);
  const root = dirname(dirname(agentDir));
  return {
    root,
    runDir: join(root, "run"),
    hash,
    agentFile,
    socket: `d-${hash}.sock`,
    pidFile: `d-${hash}.pid`,
    log: `daemon-${hash}.log`,
  };
}

/** `--idle-ms=N` among the mode's arguments (bounded; the default otherwise). */
export function idleArg(args: string[], fallback: number): number {
  for (const a of args) {
    const m = /^--idle-ms=(\d{1,9})$/.exec(a);
    if (m) return Math.max(1000, Number(m[1]));
  }
  return fallback;
}
