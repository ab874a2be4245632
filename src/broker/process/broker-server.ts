// The broker process's Unix-socket side: wins (or loses) the race for its configuration's socket,
// bridges each client connection to one stream of the host daemon (or, for PTYs, one SSH pty
// channel) from the pool, and exits when idle, when asked, or once a newer broker has taken its
// socket path and its last conversation has closed.
import { chmodSync, rmSync, statSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { BinaryFrameDecoder, FrameBoundary, FrameKind, encodeJson, AGENT_READY_MARKER, type Frame } from "../../shared/frames.js";
import { RuntimeError, oneLine, toWireError } from "../../shared/errors.js";
import type { RuntimeOptions } from "../../transport/options.js";
import type { ConnectionPlan } from "../../transport/ssh-config/resolve.js";
import type { PtyChannel } from "../../transport/host.js";
import { dial } from "../common/dial.js";
import { withLock } from "../common/lock.js";
import type { BrokerPaths } from "../common/broker-paths.js";
import { ChannelPool, type Lease, type StreamLease } from "./channel-pool.js";
import { PortForwarder } from "./port-forwards.js";
import { BrokerRequestSchema, WindowMessageSchema, readLine, writeLine, type BrokerResult } from "../common/wire.js";
import { isUnknown, parseJson, windowDimension } from "../../shared/guards.js";
import { listenUnix } from "../../shared/listen-unix.js";

/** A client must name its channel this soon after connecting. */
const HEADER_TIMEOUT_MS = 10_000;
/** A resumable exec's client waiting through an outage: how often the pool is asked again. */
const SESSION_RETRY_MS = 1000;

/** A resumable exec's conversation: its token and attach generation (src/shared/stream-replay.ts). */
export interface Session {
  token: string;
  gen: number;
}

export interface BrokerConfig {
  options: RuntimeOptions;
  /** The hop chain the client resolved (and keyed the broker by); resolved here when absent. */
  plan?: ConnectionPlan;
  /** The starting operation's environment, for a ProxyCommand of the plan only. */
  proxyEnv?: NodeJS.ProcessEnv;
  paths: BrokerPaths;
  version: string;
  log(line: string): void;
}

/**
 * Binding a Unix socket path is an exclusive create, so exactly one broker per configuration
 * listens. A path held by a dead or foreign-version broker is removed under the lock, after a
 * second look, so a broker that just won is never unlinked by a late competitor.
 */
async function claimSocket(cfg: BrokerConfig): Promise<Server | null> {
  const { socket, lock } = cfg.paths;
  for (let attempt = 0; attempt < 5; attempt++) {
    const server = createServer({ allowHalfOpen: true });
    try {
      await listenUnix(server, socket);
      chmodSync(socket, 0o600);
      return server;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    }
    const first = await dial(socket, cfg.version);
    if (first.state === "ok") {
      first.sock.destroy();
      return null;
    }
    await withLock(lock, async () => {
      const again = await dial(socket, cfg.version);
      if (again.state === "ok") {
        again.sock.destroy();
        return;
      }
      cfg.log(`replacing broken broker socket (${again.state === "absent" ? again.code : again.detail})`);
      rmSync(socket, { force: true });
    });
  }
  throw new RuntimeError("network", `could not claim broker socket ${socket}`);
}

export class BrokerServer {
  private readonly clients = new Set<Socket>();
  private lastActivity = Date.now();
  private ino = 0;
  private lostPath = false;
  private stopping = false;
  private ticks = 0;
  private readonly timer: NodeJS.Timeout;
  readonly pool: ChannelPool;

  private constructor(
    private readonly server: Server,
    private readonly cfg: BrokerConfig,
    pool: ChannelPool,
    private readonly onExit: () => void,
  ) {
    this.ino = statSync(cfg.paths.socket).ino;
    this.pool = pool;
    this.pool.on("log", (l) => cfg.log(l));
    this.pool.on("change", () => (this.lastActivity = Date.now()));
    // The host went away for longer than the reconnect window: with nobody attached there is
    // nothing to keep; the next operation starts a fresh broker.
    this.pool.on("unreachable", () => {
      if (this.clients.size === 0 && !this.pool.busy) void this.stop("host unreachable after the connection dropped");
    });
    // One line per kind of notice the host daemon sends (docs/architecture.md "Notices").
    const forwards = new PortForwarder({ open: (h, p) => pool.forwardTcp(h, p), forwardPorts: cfg.options.forwardPorts, log: cfg.log });
    pool.notices.onNotice("ports", forwards.handle, forwards.view);
    server.on("connection", (sock) => this.onClient(sock));
    this.timer = setInterval(() => this.tick(), 500);
  }

  /** Null when a live broker of this version already serves the configuration. */
  static async start(cfg: BrokerConfig, onExit: () => void): Promise<BrokerServer | null> {
    // Whatever can fail at start (e.g. an agent bundle from another build) fails before the socket
    // is claimed, so a broken broker never leaves a socket behind.
    const pool = new ChannelPool(cfg.options, cfg.plan, cfg.proxyEnv);
    const server = await claimSocket(cfg);
    if (!server) {
      pool.close();
      return null;
    }
    cfg.log(`broker ${process.pid} listening (idle exit after ${cfg.options.brokerIdleMs} ms)`);
    return new BrokerServer(server, cfg, pool, onExit);
  }

  private ownsPath(): boolean {
    try {
      return statSync(this.cfg.paths.socket).ino === this.ino;
    } catch {
      return false;
    }
  }

  private tick(): void {
    if (!this.ownsPath() && !this.lostPath) {
      // Someone replaced our socket (we were judged broken): serve what we have; nobody can reach
      // us any more. Not server.close(): Node unlinks the bound path on close, which is the new
      // broker's socket now.
      this.lostPath = true;
      this.cfg.log("socket path taken over by another broker; finishing current channels");
    }
    // Client-gone notices to deliver: every second, send them or keep reaching for the host.
    if (this.pool.clientGonePending > 0 && ++this.ticks % 2 === 0) this.pool.deliverPending();
    const idle = this.clients.size === 0 && !this.pool.busy;
    if (!idle) return;
    if (this.lostPath) return void this.stop("replaced and idle");
    if (Date.now() - this.lastActivity >= this.cfg.options.brokerIdleMs) void this.stop("idle");
  }

  /** Stops accepting (removing our socket only if it is still ours), closes SSH, exits. */
  async stop(why: string): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    clearInterval(this.timer);
    this.cfg.log(`broker ${process.pid} exiting: ${why}`);
    try {
      await withLock(this.cfg.paths.lock, async () => {
        // Closing the server unlinks its path (Node does): only while the path is still ours.
        if (this.ownsPath()) this.server.close();
      });
    } catch (err) {
      this.cfg.log(`could not remove socket: ${oneLine((err as Error).message)}`);
      if (this.ownsPath()) this.server.close();
    }
    for (const c of this.clients) c.destroy();
    this.pool.close();
    this.onExit();
  }

  private async onClient(sock: Socket): Promise<void> {
    this.clients.add(sock);
    this.lastActivity = Date.now();
    sock.on("error", () => undefined);
    sock.once("close", () => {
      this.clients.delete(sock);
      this.lastActivity = Date.now();
    });
    writeLine(sock, { v: this.cfg.version, pid: process.pid });
    let raw: unknown;
    try {
      raw = await readLine(sock, isUnknown, HEADER_TIMEOUT_MS, "header");
    } catch {
      sock.destroy();
      return;
    }
    if (!BrokerRequestSchema(raw)) {
      this.answer(sock, { ok: false, errorClass: "input", message: "malformed broker request" });
      sock.end();
      return;
    }
    const req = raw;
    try {
      switch (req.kind) {
        case "ping":
          this.answer(sock, {
            ok: true,
            stats: {
              pid: process.pid,
              connections: this.pool.connectionCount,
              handshakes: this.pool.handshakes,
              liveChannels: this.pool.liveChannels,
              muxChannels: this.pool.muxChannels,
              sessionChannels: this.pool.sessionChannels,
              daemonTransport: this.pool.daemonTransport,
              notices: this.pool.notices.live,
              noticesUp: this.pool.notices.up,
            },
          });
          sock.end();
          return;
        case "notices":
          await this.pool.noticesArrived(this.cfg.options.connectTimeoutMs);
          this.answer(sock, { ok: true, notices: this.pool.notices.describe(req.of, req.key) });
          sock.end();
          return;
        case "shutdown":
          if (req.retireDaemon === true) await this.pool.retireDaemon();
          this.answer(sock, { ok: true });
          sock.end();
          await this.stop("asked to shut down");
          return;
        case "agent": {
          if (req.token === undefined) return this.bridgeStream(sock, await this.pool.stream(req.failFast === true));
          const session: Session = { token: req.token, gen: req.gen ?? 0 };
          if (req.reattach !== true) return this.bridgeStream(sock, await this.pool.stream(req.failFast === true), session);
          // The client is alive at this generation: a client-gone pending for an earlier one is void.
          this.pool.reopening(session);
          return await this.bridgeSession(sock, session);
        }
        case "pty":
          return this.bridgePty(sock, await this.pool.pty(req.args, req.pty));
      }
    } catch (err) {
      this.answer(sock, { ok: false, ...toWireError(err) });
      sock.end();
    }
  }

  private answer(sock: Socket, result: BrokerResult): void {
    if (!sock.destroyed) writeLine(sock, result);
  }

  /**
   * A resumable exec's re-attachment: while the link is down the client waits here (the pool keeps
   * reconnecting), so a wrapper that dies meanwhile is seen: the pool tells the daemon its client
   * is gone as soon as a channel is back. (Its first conversation fails like any
   * operation when the host cannot be reached: there is no exec to keep yet.)
   */
  private async bridgeSession(sock: Socket, session: Session): Promise<void> {
    // Read while waiting, or its going away (EOF on a half-open socket) would not be seen; a
    // client sends nothing before our answer, but whatever it does send is kept for the stream.
    let gone = false;
    let wake!: () => void;
    const left = new Promise<null>((resolve) => (wake = () => resolve(null)));
    const early: Buffer[] = [];
    const onData = (d: Buffer) => early.push(d);
    const onGone = () => {
      gone = true;
      wake();
    };
    sock.on("data", onData).once("end", onGone).once("close", onGone);
    sock.resume();
    while (!gone) {
      const attempt = this.pool.stream().then(
        (lease) => ({ lease }),
        (err: unknown) => ({ err }),
      );
      const got = await Promise.race([attempt, left]);
      if (got === null || gone) {
        // Gone while waiting: the daemon hears it as a notice once a channel is back, not on the
        // stream this wait may still get (a plain one that names no exec), which is given back.
        void attempt.then((r) => {
          if (!("lease" in r)) return;
          r.lease.stream.reset("client-gone");
          r.lease.release();
        });
        break;
      }
      if ("lease" in got) {
        sock.pause();
        sock.off("data", onData).off("end", onGone).off("close", onGone);
        if (early.length > 0) sock.unshift(Buffer.concat(early));
        return this.bridgeStream(sock, got.lease, session);
      }
      const err = got.err;
      if (this.stopping || (err instanceof RuntimeError && err.errorClass !== "network")) throw err;
      await Promise.race([new Promise((r) => setTimeout(r, SESSION_RETRY_MS)), left]);
    }
    sock.destroy();
    this.cfg.log("the wrapper of a resumable exec went away while waiting for the link: the daemon hears it once a channel is back");
    this.pool.clientGoneWhenBack(session);
  }

  /**
   * Client bytes go to the stream verbatim and the stream's bytes (agent frames) back behind a
   * fresh ready marker, each side read only as fast as the other takes it. A client that goes away
   * without ending resets the stream as client-gone (the daemon's loss rule applies); a stream lost
   * with its channel (link or daemon gone) ends the client with one last `error` frame naming why —
   * or, for a resumable exec (`session`), just closes it: its wrapper re-attaches. Such a client
   * that goes away without ending is also reported to the pool, in case the reset never arrives (a
   * link that is silently dead).
   */
  private bridgeStream(sock: Socket, { stream, link, release }: StreamLease, session?: Session): void {
    if (sock.destroyed) {
      stream.reset("client-gone");
      release();
      return;
    }
    this.answer(sock, { ok: true });
    sock.write(AGENT_READY_MARKER);
    const boundary = new FrameBoundary();
    stream.on("data", (d: Buffer) => {
      boundary.push(d);
      if (!sock.write(d)) {
        stream.pause();
        sock.once("drain", () => stream.resume());
      }
    });
    let clientLeft = false;
    stream.on("end", () => sock.end());
    stream.once("close", (info) => {
      release();
      // The wrapper went away and the link went before the daemon could end the exec's stream:
      // whether its END (or reset) reached the daemon is unknown, so its client-gone is sent again by token.
      if (session !== undefined && clientLeft && info.reason !== null && info.reason !== "client-gone") {
        this.pool.clientGoneWhenBack(session, link);
      }
      if (info.reason === null || sock.destroyed) return;
      if (info.reason !== "client-gone" && boundary.atBoundary && session === undefined) {
        sock.end(encodeJson({ type: "error", ...toWireError(link.lossError(info)) }));
      } else {
        sock.destroy();
      }
    });
    sock.on("data", (d: Buffer) => {
      if (!stream.write(d)) {
        sock.pause();
        void stream.drained().then(() => sock.resume());
      }
    });
    sock.once("end", () => {
      clientLeft = true;
      stream.end();
    });
    sock.once("close", () => {
      if (session !== undefined && !clientLeft && !stream.closed) this.pool.clientGoneWhenBack(session, link);
      clientLeft = true;
      stream.reset("client-gone");
    });
    sock.resume();
  }

  /** The PTY side protocol's one message: {"type":"window","rows":…,"cols":…}. */
  private applyWindow(channel: PtyChannel, payload: Buffer): void {
    const value = parseJson(payload);
    if (value === undefined) {
      this.cfg.log("ignored a PTY control message that is not JSON");
      return;
    }
    if (WindowMessageSchema(value)) channel.setWindow(windowDimension(value.rows), windowDimension(value.cols));
  }

  /** Terminal output goes back raw; client input arrives framed (keystrokes, window, EOF). */
  private bridgePty(sock: Socket, { channel, release }: Lease<PtyChannel>): void {
    if (sock.destroyed) {
      channel.destroy();
      release();
      return;
    }
    this.answer(sock, { ok: true });
    channel.output.pipe(sock);
    // Once the channel is gone, input is dropped and the socket read again (it may be paused by
    // backpressure that can no longer clear), so the client's end is seen and it counts as gone.
    let channelClosed = false;
    void channel.closed.then(() => {
      channelClosed = true;
      release();
      sock.resume();
    });
    const decoder = new BinaryFrameDecoder();
    sock.on("data", (d: Buffer) => {
      if (channelClosed) return;
      let frames: Frame[];
      try {
        frames = decoder.push(d);
      } catch {
        channel.destroy();
        sock.destroy();
        return;
      }
      for (const f of frames) {
        if (f.kind === FrameKind.Stdin && !channel.stdin.write(f.payload)) {
          sock.pause();
          channel.stdin.once("drain", () => sock.resume());
        }
        if (f.kind === FrameKind.Eof) channel.stdin.end();
        if (f.kind === FrameKind.Json) this.applyWindow(channel, f.payload);
      }
    });
    sock.once("close", () => channel.destroy());
    sock.resume();
  }
}
