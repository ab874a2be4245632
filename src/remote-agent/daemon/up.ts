// The two short-lived modes that reach the host daemon, both run through the fixed bootstrap
// command (so node discovery, version checks and install stay where they are):
//   daemon-up  makes sure a daemon of this build answers on its socket (starting one detached if
//              none does, bounded), prints `{"socket":<absolute path>,"pid":<n>}` and exits; the
//              broker then opens a stream-local channel to that socket.
//   relay      the same, then pipes stdin/stdout to the socket: the channel for servers that refuse
//              stream-local forwarding (one extra process on the host for the life of the channel).
// Racing starters are harmless: binding the socket is the daemon's exclusive step.
import { spawn } from "node:child_process";
import { closeSync, openSync, readFileSync, statSync, truncateSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { toWireError, oneLine, RuntimeError } from "../../shared/errors.js";
import { AGENT_READY_MARKER } from "../../shared/frames.js";
import { daemonPaths, idleArg, type DaemonPaths } from "./daemon-paths.js";
import { probeDaemon } from "./daemon-probe.js";
import { DAEMON_IDLE_MS, prepareRunDir } from "./host-daemon.js";

/** How long a started daemon may take to answer (node start-up plus the bind). */
export const DAEMON_START_MS = 10_000;
const MAX_LOG_BYTES = 1024 * 1024;
const POLL_MS = 20;

export interface DaemonInfo {
  socket: string;
  pid: number;
}

function lastLogLine(log: string): string {
  try {
    const lines = readFileSync(log, "utf8").trim().split("\n");
    return oneLine(lines[lines.length - 1] ?? "").slice(0, 300);
  } catch {
    return "no log";
  }
}

function startDaemon(paths: DaemonPaths, idleMs: number, onExit: (code: number | null) => void): void {
  try {
    if (statSync(paths.log).size > MAX_LOG_BYTES) truncateSync(paths.log, 0);
  } catch {
    // no log yet
  }
  const fd = openSync(paths.log, "a", 0o600);
  try {
    const child = spawn(process.execPath, [paths.agentFile, "daemon", `--idle-ms=${idleMs}`], {
      detached: true,
      stdio: ["ignore", fd, fd],
      cwd: paths.runDir,
    });
    child.on("error", () => onExit(null));
    child.on("exit", (code) => onExit(code));
    child.unref();
  } finally {
    closeSync(fd);
  }
}

/** Runs with cwd = run/ (prepareRunDir). */
export async function ensureDaemon(paths: DaemonPaths, idleMs: number): Promise<DaemonInfo> {
  const info = (pid: unknown): DaemonInfo => ({ socket: join(paths.runDir, paths.socket), pid: Number(pid) });
  const live = await probeDaemon(paths.socket, paths.hash);
  if (live) return info(live.pid);
  let exited: number | null | undefined;
  startDaemon(paths, idleMs, (code) => (exited = code));
  const until = Date.now() + DAEMON_START_MS;
  for (;;) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    const hello = await probeDaemon(paths.socket, paths.hash);
    if (hello) return info(hello.pid);
    // Exit 0 is a daemon that lost the race to another one: keep probing for the winner.
    if (exited !== undefined && exited !== 0) {
      throw new RuntimeError("remote", `the host daemon failed to start: ${lastLogLine(paths.log)}`);
    }
    if (Date.now() > until) {
      throw new RuntimeError("remote", `the host daemon did not answer within ${DAEMON_START_MS} ms: ${lastLogLine(paths.log)}`);
    }
  }
}

function exitAfter(text: string, code: number): void {
  process.stdout.write(text, () => process.exit(code));
}

export function daemonUpMain(agentFile: string, args: string[]): void {
  process.stdout.write(AGENT_READY_MARKER);
  void (async () => {
    const paths = daemonPaths(agentFile);
    prepareRunDir(paths);
    return ensureDaemon(paths, idleArg(args, DAEMON_IDLE_MS));
  })().then(
    (info) => exitAfter(`${JSON.stringify(info)}\n`, 0),
    (err: unknown) => exitAfter(`${JSON.stringify({ error: toWireError(err) })}\n`, 1),
  );
}

export function relayMain(agentFile: string, args: string[]): void {
  process.stdout.write(AGENT_READY_MARKER);
  void (async () => {
    const paths = daemonPaths(agentFile);
    prepareRunDir(paths);
    await ensureDaemon(paths, idleArg(args, DAEMON_IDLE_MS));
    const sock = connect(paths.socket);
    await new Promise<void>((resolve, reject) => {
      sock.once("connect", resolve);
      sock.once("error", reject);
    });
    // The link's end is the channel's end: once our stdin ends (the client closed the channel, or
    // the server closed it when the connection dropped) nothing more can reach the client, so the
    // daemon must see the stream close now, as it does when sshd's forwarded socket closes, not
    // only when its keepalive gives up on a half-closed socket.
    process.stdin.pipe(sock, { end: false });
    process.stdin.once("end", () => {
      sock.destroy();
      process.exit(0);
    });
    sock.pipe(process.stdout);
    sock.on("error", () => process.exit(1));
    sock.on("close", () => process.exit(0));
    process.stdout.on("error", () => process.exit(0));
  })().catch((err: unknown) => {
    process.stderr.write(`relay: ${toWireError(err).message}\n`);
    process.exit(1);
  });
}
