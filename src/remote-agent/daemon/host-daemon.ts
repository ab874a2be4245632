// The host daemon: `node <root>/agent/<hash>/agent.cjs daemon`, one per (login user, root, agent
// build), started detached by daemon-up (own session, SIGHUP ignored, output to a private log).
// It listens on `<root>/run/d-<hash>.sock` (0600 in a 0700 directory) and speaks the mux there:
// each connection is a channel (the broker's stream-local forward, or a relay); each stream on it
// is one agent conversation, served in-process by the same op handlers a one-shot agent uses. It
// supervises every exec it starts (exec records name it by pid + start time) and outlives the
// streams: a lost stream is handled by the exec loss rule (exec/sessions.ts), never by exiting.
// A client-gone the lost channel could not carry arrives later as a stream of its own (ClientGoneHeader).
//
// Lifetime: exits once no exec is live and no stream is open (notices streams are not work), after `--idle-ms` (default 5 min);
// at once when retired (a daemon of another build asked it to step aside) or when its socket path
// no longer leads to it (root removed, or replaced after it was judged dead).
import {
  chmodSync,
  ftruncateSync,
  fstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { oneLine } from "../../shared/errors.js";
import { listenUnix } from "../../shared/listen-unix.js";
import { Mux, type MuxStream } from "../../shared/mux.js";
import type { ConversationPort } from "../serve-conversation.js";
import { serveConversation } from "../serve-conversation.js";
import { execSupervisors } from "../exec/sessions.js";
import { clientGone, loseDetached, setSessionLog } from "../exec/exec-session.js";
import { StreamHeader, streamHeader } from "../../shared/agent-api.js";
import { readProcStat } from "../../shared/proc-stat.js";
import { expandRoot } from "../expand-root.js";
import { DAEMON_SOCKET, daemonPaths, idleArg, type DaemonPaths } from "./daemon-paths.js";
import { probeDaemon } from "./daemon-probe.js";
import { sweepOrphanedExecs } from "./sweep.js";
import { droppedClientGoneNotices, testNotices } from "../test-hooks.js";
import { noticeBoard } from "../notice-board.js";
import { portWatch } from "../exec/port-watch.js";
import { watchWork } from "../workspace/work-watch.js";
import { terminalSupport } from "../exec/pty.js";
import { enableSpareCheckouts, spareBuildsRunning, stopSpareBuilds } from "../workspace/spare-checkout.js";

export const DAEMON_IDLE_MS = 5 * 60_000;
const TICK_MS = 1000;
const MAX_LOG_BYTES = 1024 * 1024;
const RETIRE_WAIT_MS = 2000;
/**
 * Before an idle exit every channel gets GOAWAY; a stream or connection that arrives within this
 * bound (sent before the peer saw it) cancels the exit and is served.
 */
const DRAIN_MS = 2000;

function log(line: string): void {
  try {
    process.stderr.write(`${new Date().toISOString()} daemon ${process.pid}: ${line}\n`);
  } catch {
    // A full disk loses log lines, never the daemon (and the execs it supervises).
  }
}

/** The mux stream as a conversation's port. */
function streamPort(stream: MuxStream): ConversationPort {
  return {
    write: (buf) => stream.write(buf),
    drained: () => stream.drained(),
    pauseInput: () => stream.pause(),
    resumeInput: () => stream.resume(),
    finish: () => stream.end(),
    onData: (l) => stream.on("data", l),
    onClose: (l) => {
      stream.on("end", () => l("end"));
      stream.on("close", (info) => l(info.reason ?? "end"));
      const info = stream.closeInfo;
      if (info) queueMicrotask(() => l(info.reason ?? "end"));
    },
  };
}

class Daemon {
  private readonly muxes = new Set<Mux<StreamHeader>>();
  private retiring = false;
  private lostPath = false;
  private stopping = false;
  private draining = false;
  /** Counters of arrivals, so a drain can tell whether anything came in meanwhile. */
  private arrivals = 0;
  /** Client-gone notices refused by the dropClientGone test hook so far. */
  private noticesDropped = 0;
  /** Keys of the "test" notices published from the test hooks file. */
  private testKeys = new Map<string, { kind: string; key: string }>();
  private lastBusy = Date.now();
  private ino = 0;
  private swept: Promise<unknown> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly paths: DaemonPaths,
    private readonly server: Server,
    private readonly idleMs: number,
  ) {
    this.ino = statSync(paths.socket).ino;
    this.timer = setInterval(() => this.tick(), TICK_MS);
  }

  start(): void {
    const { paths } = this;
    const st = readProcStat(process.pid);
    const tmp = `.${paths.pidFile}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify({ pid: process.pid, startTime: st?.startTime ?? null, hash: paths.hash }) + "\n", { mode: 0o600 });
    renameSync(tmp, paths.pidFile);
    log(`listening on ${paths.runDir}/${paths.socket} (idle exit after ${this.idleMs} ms)`);
    // Conversations wait for the sweep, so no op ever sees an orphan of a crashed daemon as live.
    this.swept = sweepOrphanedExecs(paths.root, log).catch((err: Error) => log(`start-up sweep failed: ${oneLine(err.message)}`));
    this.server.on("connection", (sock) => this.onConnection(sock));
    // Ports the workspaces' processes listen on become notices (while any exec is live).
    portWatch.enable();
    void this.retireOthers();
    // The live mirror: whose refs moved, told on the notices stream while a broker listens.
    watchWork(paths.root, {
      moved: (state) => noticeBoard.publish("work", state.workspaceId, { state }),
      gone: (id) => noticeBoard.publish("work", id, null),
      active: () => noticeBoard.subscribers > 0,
    });
    // Known before the first PTY exec asks (probed once per host and agent build, then cached).
    void terminalSupport(this.agentDir).then(
      (s) => log(`terminals: ${s.method === "none" ? `sshd's pty (${s.reason})` : s.method}`),
      (err: Error) => log(`terminal probe failed: ${oneLine(err.message)}`),
    );
    for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => void this.stop(`${sig}: reaping live execs`, { reap: true }));
  }

  private onConnection(sock: Socket): void {
    this.lastBusy = Date.now();
    this.arrivals++;
    sock.on("error", () => undefined);
    const mux = new Mux(sock, { role: "server", build: this.paths.hash, pid: process.pid, log, header: StreamHeader });
    this.muxes.add(mux);
    mux.on("close", (why, code) => {
      this.muxes.delete(mux);
      this.lastBusy = Date.now();
      if (code !== "peer-closed" && code !== "transport-closed") log(`channel lost: ${why}`);
    });
    mux.on("stream", (stream) => this.onStream(stream));
  }

  /** Every kind of StreamHeader has its case (the mux refused any other header). */
  private onStream(stream: MuxStream<StreamHeader>): void {
    const header = stream.header;
    if (header.kind === "notices") {
      // Not work: the broker keeps one open on every channel, idle or not.
      noticeBoard.subscribe(stream, header.answers ?? []);
      return;
    }
    this.lastBusy = Date.now();
    this.arrivals++;
    if (header.kind === "retire") {
      this.retire();
      stream.end();
      return;
    }
    if (header.kind === "client-gone") {
      // The late delivery of a resumable exec's client-gone reset; after the sweep, like every op.
      if (this.noticesDropped < droppedClientGoneNotices(this.paths.root)) {
        this.noticesDropped++;
        log("test hook: a client-gone notice was refused unapplied");
        return stream.reset("error", "refused by a test hook");
      }
      void this.swept.then(() => {
        clientGone(header.token, header.gen);
        stream.end();
      });
      return;
    }
    header.kind satisfies "agent";
    // Hold the bytes (and the sender, by credit) until the conversation is attached.
    stream.pause();
    void this.swept.then(() => {
      serveConversation(streamPort(stream), {
        agentDir: this.agentDir,
        nodePath: process.execPath,
        resolveRoot: (r) => this.resolveRoot(r),
      });
      stream.resume();
    });
  }

  private get agentDir(): string {
    return this.paths.agentFile.slice(0, this.paths.agentFile.lastIndexOf("/"));
  }

  /**
   * A daemon serves exactly its own root: a request naming another one reached the wrong daemon.
   * Judged after realpath, because node started the daemon from its script's real path: a root
   * configured through a symlink names the same directory, and is served in the daemon's spelling
   * so that every path it hands out (placement cwd, sweeps) is one spelling.
   */
  private resolveRoot(root: string): string {
    const abs = expandRoot(root);
    const real = abs === this.paths.root ? abs : realpathOrNull(abs);
    if (real === null || (real !== this.paths.root && real !== realpathOrNull(this.paths.root)))
      throw new Error(`agent request for root ${abs} reached the daemon of ${this.paths.root}`);
    return this.paths.root;
  }

  private retire(): void {
    if (this.retiring) return;
    this.retiring = true;
    log("asked to retire: exiting once no exec is live and no stream open");
  }

  /** Tells daemons of other builds in run/ to retire; removes sockets nobody listens on. */
  private async retireOthers(): Promise<void> {
    let names: string[] = [];
    try {
      names = readdirSync(".");
    } catch {
      return;
    }
    for (const name of names) {
      const m = DAEMON_SOCKET.exec(name);
      if (!m || m[1] === this.paths.hash) continue;
      const hello = await probeDaemon(name, this.paths.hash);
      if (!hello) {
        rmSync(name, { force: true });
        rmSync(`d-${m[1]}.pid`, { force: true });
        continue;
      }
      await sendRetire(name, this.paths.hash).catch(() => undefined);
      log(`asked daemon ${String(hello.pid)} of build ${m[1]} to retire`);
    }
  }

  /** Streams that are work: every open stream but the notices streams. */
  private openStreams(): number {
    let n = 0;
    for (const m of this.muxes) n += m.streamCount;
    return n - noticeBoard.subscribers;
  }

  /** The notices a suite asked for through the test hooks file (none without it). */
  private publishTestNotices(): void {
    const wanted = testNotices(this.paths.root);
    if (wanted === null && this.testKeys.size === 0) return;
    // Unchecked on purpose: the hook plays a host of another build, or a hostile one.
    const publish = noticeBoard.publish.bind(noticeBoard) as (kind: string, key: string, payload: Record<string, unknown> | null) => void;
    const id = (kind: string, key: string) => JSON.stringify([kind, key]);
    const now = new Map(
      Object.entries(wanted?.notices ?? {}).map(([key, payload]) => [id(wanted!.kind, key), { kind: wanted!.kind, key, payload }]),
    );
    for (const [k, { kind, key }] of this.testKeys) if (!now.has(k)) publish(kind, key, null);
    this.testKeys = new Map([...now].map(([k, v]) => [k, { kind: v.kind, key: v.key }]));
    for (const { kind, key, payload } of now.values()) publish(kind, key, payload);
  }

  private ownsPath(): boolean {
    try {
      return statSync(this.paths.socket).ino === this.ino;
    } catch {
      return false;
    }
  }

  private tick(): void {
    if (!this.lostPath && !this.ownsPath()) {
      this.lostPath = true;
      // Not server.close(): Node unlinks the bound path on close, which may be a newer daemon's now.
      log("socket path no longer leads here (root removed or taken over): serving current execs, then exiting");
    }
    try {
      if (fstatSync(2).size > MAX_LOG_BYTES) ftruncateSync(2, 0);
    } catch {
      // stderr is not a file (started by hand)
    }
    this.publishTestNotices();
    // Unreachable now: a wrapper's re-attach would reach whichever daemon holds the path.
    if (this.lostPath && this.muxes.size === 0) loseDetached();
    if (this.draining) return;
    // A spare checkout being written counts as work: leaving would strand it half-made.
    if (execSupervisors.size > 0 || this.openStreams() > 0 || spareBuildsRunning() > 0) {
      this.lastBusy = Date.now();
      return;
    }
    if (this.retiring) void this.leave("retired and idle");
    else if (this.lostPath) void this.stop("socket gone and idle");
    else if (Date.now() - this.lastBusy >= this.idleMs) void this.leave(`idle for ${this.idleMs} ms`);
  }

  /**
   * Exits when idle without losing a stream the broker opened at that very moment: every channel
   * gets GOAWAY (the broker opens nothing more on it), and anything arriving within DRAIN_MS
   * (sent before the GOAWAY reached the peer) cancels the exit and is served.
   */
  private async leave(why: string): Promise<void> {
    this.draining = true;
    const before = this.arrivals;
    for (const m of this.muxes) m.goAway();
    const until = Date.now() + DRAIN_MS;
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, 50));
      if (this.arrivals !== before || execSupervisors.size > 0 || this.openStreams() > 0) {
        this.draining = false;
        this.lastBusy = Date.now();
        log("work arrived while leaving: staying");
        return;
      }
    }
    await this.stop(why);
  }

  /** Stops serving; `reap`: kill live execs first (the daemon itself is being terminated). */
  async stop(why: string, { reap = false }: { reap?: boolean } = {}): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    clearInterval(this.timer);
    log(`exiting: ${why}`);
    stopSpareBuilds();
    // Closing the server unlinks its path: only while the path is still ours.
    if (this.ownsPath()) {
      this.server.close();
      if (readPid(this.paths.pidFile) === process.pid) rmSync(this.paths.pidFile, { force: true });
    }
    if (reap) for (const failure of await execSupervisors.abandonAll()) log(`reaping failed: ${oneLine(failure)}`);
    for (const m of this.muxes) m.close("daemon exiting");
    setTimeout(() => process.exit(0), 50);
  }
}

function realpathOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

function readPid(file: string): number | null {
  try {
    return Number((JSON.parse(readFileSync(file, "utf8")) as { pid?: unknown }).pid);
  } catch {
    return null;
  }
}

/** Opens a `retire` stream on another daemon's socket and waits (bounded) for its answer. */
function sendRetire(socket: string, build: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const sock: Socket = connect(socket);
    const timer = setTimeout(() => finish(new Error("no answer")), RETIRE_WAIT_MS);
    const finish = (err?: Error) => {
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve();
    };
    sock.once("error", (err) => finish(err));
    sock.once("connect", () => {
      const mux = new Mux(sock, { role: "client", build, header: StreamHeader });
      const stream = mux.open(streamHeader.retire);
      stream.once("close", () => finish());
      stream.end();
    });
  });
}

/**
 * Binding the socket is the exclusive step: a second daemon of this build finds it in use and
 * exits (null). A socket nobody answers on is stale: removed, and the bind retried.
 */
async function claimSocket(paths: DaemonPaths): Promise<Server | null> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const server = createServer();
    try {
      await listenUnix(server, paths.socket);
      chmodSync(paths.socket, 0o600);
      return server;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    }
    if (await probeDaemon(paths.socket, paths.hash)) return null;
    log(`removing stale socket ${paths.socket}`);
    rmSync(paths.socket, { force: true });
  }
  throw new Error(`could not bind ${paths.runDir}/${paths.socket}`);
}

/**
 * The umask stays the login session's: workloads and checkouts inherit it. Everything the daemon
 * creates in run/ gets an explicit mode instead (and run/ itself is 0700).
 */
export function prepareRunDir(paths: DaemonPaths): void {
  mkdirSync(paths.runDir, { recursive: true, mode: 0o700 });
  chmodSync(paths.runDir, 0o700);
  process.chdir(paths.runDir);
}

export function daemonMain(agentFile: string, args: string[]): void {
  const paths = daemonPaths(agentFile);
  const idleMs = idleArg(args, DAEMON_IDLE_MS);
  process.on("SIGHUP", () => undefined);
  process.stderr.on("error", () => undefined);
  enableSpareCheckouts();
  // One failing conversation must not take every exec's supervision down with it.
  process.on("uncaughtException", (err) => log(`uncaught: ${oneLine(err.stack ?? err.message)}`));
  process.on("unhandledRejection", (err) => log(`unhandled rejection: ${oneLine(String(err))}`));
  prepareRunDir(paths);
  setSessionLog(log);
  claimSocket(paths).then(
    (server) => {
      if (!server) {
        log("another daemon of this build already listens; exiting");
        process.exit(0);
      }
      new Daemon(paths, server, idleMs).start();
    },
    (err: Error) => {
      log(`failed to start: ${oneLine(err.message)}`);
      process.exit(1);
    },
  );
}
