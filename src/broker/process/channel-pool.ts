// The broker's SSH side. Connections are built with the transport's connectSsh and SshHost (host-key
// and auth logic exist once). Every agent conversation is a stream of the host daemon over the first
// connection's one mux channel (daemon-link.ts), so their number is bounded neither by sshd's
// MaxSessions nor by processes. Session channels remain for PTYs through sshd (and daemon-up, the
// relay fallback, installs); each connection counts them (counted-connection.ts) so none carries
// more than MaxSessions, extra connections open beyond that, and a lost link is re-established
// with backoff and jitter (reconnect.ts), the host key verified again each time.
import { EventEmitter } from "node:events";
import type { Duplex } from "node:stream";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import type { MuxStream, StreamClose } from "../../shared/mux.js";
import { streamHeader, type ClientGoneHeader } from "../../shared/agent-api.js";
import type { RuntimeOptions } from "../../transport/options.js";
import type { ConnectionPlan } from "../../transport/ssh-config/resolve.js";
import type { DaemonLink } from "../../transport/daemon-link.js";
import type { PtyChannel, PtyRequest } from "../../transport/host.js";
import { agentBundle } from "../../transport/bootstrap.js";
import { connectSsh } from "../../transport/ssh-connection.js";
import { SshHost } from "../../transport/ssh-host.js";
import { ACQUIRE_WAIT_MS } from "../common/wire.js";
import { CountedConnection } from "./counted-connection.js";
import { reconnect } from "./reconnect.js";
import { NoticeRegistry } from "./notices.js";
import { ClientGoneQueue, type ClientGoneEvent } from "../../shared/exec-session-core.js";

/** More connections than this per broker and PTY channels queue instead. */
export const MAX_CONNECTIONS = 16;
/** Extra connections close after being unused this long. */
const EXTRA_IDLE_MS = 10_000;
/** Bound for the host daemon to confirm a retire request. */
const RETIRE_WAIT_MS = 2000;
/** Bound for the host daemon to confirm a client-gone notice. */
const NOTICE_WAIT_MS = 10_000;
/** A daemon channel lost while notices are held is reopened after this pause (a daemon that keeps dying is not hammered). */
const NOTICES_RELINK_MS = 1000;

interface Conn {
  ssh: CountedConnection;
  host: SshHost;
  /** PTY channels held (or about to be opened) on this connection. */
  leases: number;
  lastUsed: number;
  /** Its agent-hold session is open or being opened (or sshd refused one): forwardAgent. */
  agentHold?: boolean;
}

export interface Lease<T> {
  channel: T;
  /** Call once the channel has closed (the session slot is then free again). */
  release(): void;
}

export interface StreamLease {
  stream: MuxStream;
  /** The link the stream belongs to (names the cause when the stream is lost). */
  link: DaemonLink;
  release(): void;
}

export class ChannelPool extends EventEmitter<{ change: []; log: [string]; unreachable: [] }> {
  private conns: Conn[] = [];
  private connecting: Promise<Conn> | undefined;
  /** An extra connection being opened because every existing one is full. */
  private extra: Promise<Conn> | undefined;
  /** True once a connection has existed: later connects are reconnects and retry with backoff. */
  private everConnected = false;
  /** The last reconnect attempt's failure, for an operation that stops waiting (primary). */
  private lastReconnectFailure = "";
  private closed = false;
  /** Client conversations bridged to daemon streams right now. */
  private streams = 0;
  handshakes = 0;
  private readonly limit: number;
  private readonly bundle = agentBundle();
  private readonly extraTimer: NodeJS.Timeout;
  /**
   * Named conversations (a resumable exec's token and attach generation) whose client went away
   * while the link was (or may have been) down, so their client-gone reset may not have reached
   * the daemon. What is kept, resent and forgotten: ClientGoneQueue in src/shared/exec-session-core.ts.
   */
  private readonly clientGoneQueue = new ClientGoneQueue<DaemonLink>();
  private flushing = false;
  /** Notices were added while a flush ran: it makes one more pass. */
  private flushAgain = false;
  /** What the host daemon tells the broker unasked (its notices stream on every new channel). */
  readonly notices = new NoticeRegistry();

  constructor(
    private readonly options: RuntimeOptions,
    private readonly plan?: ConnectionPlan,
    /** Environment for a ProxyCommand of the plan (the broker's own is minimal). */
    private readonly proxyEnv?: NodeJS.ProcessEnv,
  ) {
    super();
    // Every queued operation waits on "change"; dozens at once are normal, not a leak.
    this.setMaxListeners(0);
    this.limit = options.maxSessions;
    this.extraTimer = setInterval(() => this.closeIdleExtras(), 1000);
    this.extraTimer.unref();
    this.notices.on("log", (l) => this.log(l));
  }

  /** Client conversations and PTY channels in use. */
  get liveChannels(): number {
    return this.streams + this.conns.reduce((n, c) => n + c.leases, 0);
  }

  get connectionCount(): number {
    return this.conns.length;
  }

  /** Mux channels to the host daemon that are open (0 or 1). */
  get muxChannels(): number {
    return this.conns.filter((c) => c.host.link.connected).length;
  }

  /** Session channels open on all connections (PTYs, a relay, a daemon-up or install in progress). */
  get sessionChannels(): number {
    return this.conns.reduce((n, c) => n + c.ssh.openChannels, 0);
  }

  /** How the daemon is reached ("stream-local" or "relay"), once it has been. */
  get daemonTransport(): string | null {
    return this.conns[0]?.host.link.transport ?? null;
  }

  private used(c: Conn): number {
    return Math.max(c.leases, c.ssh.openChannels);
  }

  private log(line: string): void {
    this.emit("log", line);
  }

  private async connectOnce(): Promise<Conn> {
    const base = await connectSsh(this.options, {}, this.plan, this.proxyEnv);
    this.handshakes++;
    const ssh = new CountedConnection(base, () => this.emit("change"));
    const host = new SshHost(ssh, this.options, this.bundle, {
      log: (l) => this.log(l),
      onConnected: () => {
        void this.flushClientGone();
        void this.openNotices(host);
      },
      onLost: (why, code) => {
        this.emit("change");
        this.relinkForNotices(host, ssh);
        // Keepalive death of the channel means the link is silent: do not wait for SSH's own
        // keepalive to notice, drop the connection and reconnect now.
        if (code === "keepalive-timeout" && !ssh.closed) {
          this.log(`dropping the connection to ${ssh.target}: ${why}`);
          ssh.destroy();
        }
      },
    });
    const conn: Conn = { ssh, host, leases: 0, lastUsed: Date.now() };
    ssh.client.once("close", () => this.dropped(conn));
    this.conns.push(conn);
    this.everConnected = true;
    this.lastReconnectFailure = "";
    this.log(`connected to ${ssh.target} (${this.conns.length} connection(s))`);
    if (this.conns.length === 1) {
      void this.flushClientGone();
      // Notices held from before the drop: the host's current state is fetched at once.
      if (this.notices.live > 0) this.relinkForNotices(host, ssh, 0);
    }
    // The first connection carries the forwarded agent, again after every reconnect.
    if (this.conns.length === 1) void this.holdAgent(conn);
    return conn;
  }

  /** Opens `conn`'s agent-hold session (forwardAgent): the host then points opted-in workspaces at it. */
  private async holdAgent(conn: Conn): Promise<void> {
    if (!this.options.forwardAgent || conn.agentHold || conn.ssh.closed) return;
    conn.agentHold = true;
    try {
      const { ch, forwarded } = await conn.host.holdAgent();
      this.log(
        forwarded ? `ssh-agent forwarded to ${conn.ssh.target}` : `${conn.ssh.target} gave no agent socket: ssh-agent not forwarded`,
      );
      ch.once("close", () => {
        conn.agentHold = false;
      });
    } catch (err) {
      // A refusal (AllowAgentForwarding no) stays one for this connection: not asked again.
      this.log(`ssh-agent not forwarded to ${conn.ssh.target}: ${oneLine(err instanceof Error ? err.message : String(err))}`);
    }
  }

  private dropped(conn: Conn): void {
    const at = this.conns.indexOf(conn);
    if (at < 0) return;
    this.conns.splice(at, 1);
    conn.host.link.close("the SSH connection closed");
    this.log(`connection to ${conn.ssh.target} closed (${this.conns.length} left)`);
    this.emit("change");
    // Reconnect right away so the next operation finds a connection waiting.
    if (!this.closed && this.conns.length === 0) {
      this.connect().catch((err: Error) => {
        this.log(oneLine(err.message));
        // What the host told us is stale now: handlers end what they hold (forwards close).
        this.notices.reset();
        this.emit("unreachable");
      });
    }
  }

  /** One connection attempt, or (after a drop) retries with backoff within the reconnect window. */
  private connect(): Promise<Conn> {
    if (this.connecting) return this.connecting;
    const attempt = this.everConnected
      ? reconnect(() => this.connectOnce(), this.options, {
          closed: () => this.closed,
          log: (line) => this.log((this.lastReconnectFailure = line)),
        })
      : this.connectOnce();
    this.connecting = attempt.finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /**
   * The first connection (the one carrying the daemon channel), connected if need be. `failFast`
   * (a pool's operation: its host is named down at once, and another host may take a create): with
   * the link down it waits connectTimeoutMs for the reconnect, not its whole window; the broker
   * keeps retrying for the operations that do wait (a resumable exec's re-attachment, a single host's).
   */
  private async primary(failFast = false): Promise<Conn> {
    if (this.closed) throw new RuntimeError("network", "SSH broker is shutting down; rerun the operation");
    if (this.conns[0]) return this.conns[0];
    if (!failFast || !this.everConnected) return this.connect();
    const ms = this.options.connectTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const last = this.lastReconnectFailure ? `; ${this.lastReconnectFailure}` : "";
        reject(
          new RuntimeError(
            "network",
            `${this.options.host}:${this.options.port} unreachable: the SSH connection dropped and was not back within ${ms} ms${last}`,
          ),
        );
      }, ms);
    });
    try {
      return await Promise.race([this.connect(), bound]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits for a pool change (a channel closed, a connection came or went), bounded. */
  private waitForChange(untilMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.off("change", done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, untilMs - Date.now()));
      this.once("change", done);
    });
  }

  /** Reserves one session slot on some connection, opening another connection when all are full. */
  private async reserve(): Promise<Conn> {
    const until = Date.now() + ACQUIRE_WAIT_MS;
    for (;;) {
      await this.primary();
      const free = this.conns.find((c) => this.used(c) < this.limit);
      if (free) {
        free.leases++;
        free.lastUsed = Date.now();
        return free;
      }
      if (this.extra) {
        await this.extra.catch(() => undefined);
        continue;
      }
      if (this.conns.length < MAX_CONNECTIONS) {
        this.extra = this.connectOnce().finally(() => (this.extra = undefined));
        await this.extra;
        continue;
      }
      if (Date.now() >= until) {
        throw new RuntimeError(
          "network",
          `all ${this.conns.length * this.limit} SSH sessions to ${this.options.host} stayed busy for ${ACQUIRE_WAIT_MS} ms; raise the host's MaxSessions and the "maxSessions" option`,
        );
      }
      await this.waitForChange(until);
    }
  }

  private releaser(conn: Conn): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      conn.leases--;
      conn.lastUsed = Date.now();
      this.emit("change");
    };
  }

  /** One agent conversation: a new stream on the daemon channel (started and connected if need be). */
  async stream(failFast = false): Promise<StreamLease> {
    const conn = await this.primary(failFast);
    // A pool's operation on a link that went silent with its connection still up (the host lost
    // power, a cable pulled) would wait for the keepalive (three intervals): the channel is asked
    // for a sign of life alongside the conversation, at no cost to it, and one that stays silent
    // for connectTimeoutMs is closed as dead, which ends the conversation with a network error.
    if (failFast) void conn.host.link.checkAlive(this.options.connectTimeoutMs);
    const stream = await conn.host.link.stream();
    this.streams++;
    this.emit("change");
    let done = false;
    return {
      stream,
      link: conn.host.link,
      release: () => {
        if (done) return;
        done = true;
        this.streams--;
        this.emit("change");
      },
    };
  }

  async pty(args: string[], req: PtyRequest): Promise<Lease<PtyChannel>> {
    // The daemon (which holds the PTY exec's control conversation) is up, and the agent installed.
    await (await this.primary()).host.link.connect();
    const conn = await this.reserve();
    const release = this.releaser(conn);
    try {
      return { channel: await conn.host.openPty(args, req), release };
    } catch (err) {
      release();
      throw err;
    }
  }

  /** Asks the host daemon to exit once no exec is live and no stream open (bounded; best effort). */
  async retireDaemon(): Promise<void> {
    const link = this.conns[0]?.host.link;
    if (!link?.connected) return;
    try {
      const stream = await link.stream(streamHeader.retire);
      const closed = new Promise<void>((resolve) => stream.once("close", () => resolve()));
      stream.end();
      await Promise.race([closed, new Promise((r) => setTimeout(r, RETIRE_WAIT_MS))]);
    } catch (err) {
      this.log(`asking the host daemon to retire failed: ${oneLine((err as Error).message)}`);
    }
  }

  /**
   * The client of the named conversation `token` at generation `gen` went away, and its
   * client-gone reset could not reach the daemon (the link was down) or may not have (`sentOn`:
   * it went out on that link's current channel, which may be silently dead: only a newer channel
   * counts). The daemon hears it on the next channel, as a stream opened with a `client-gone`
   * header naming the conversation; the daemon decides what that means for the exec.
   */
  clientGoneWhenBack({ token, gen }: { token: string; gen: number }, sentOn?: DaemonLink): void {
    if (this.closed) return;
    const on = sentOn ? { link: sentOn, opened: sentOn.channelsOpened } : null;
    this.clientGone({ type: "gone", token, gen, now: Date.now(), graceMs: this.options.reconnectGraceMs, sentOn: on });
  }

  /** The named conversation `token` is opened again at generation `gen`: its client is alive. */
  reopening({ token, gen }: { token: string; gen: number }): void {
    this.clientGone({ type: "reopened", token, gen });
  }

  /** Feeds the client-gone queue one event and performs what it decides. */
  private clientGone(e: ClientGoneEvent<DaemonLink>): void {
    for (const a of this.clientGoneQueue.handle(e)) {
      if (a.do === "flush") void this.flushClientGone();
      else this.log(a.line);
    }
  }

  /**
   * Client-gone notices still to be delivered (they keep the broker alive and reconnecting). One
   * whose client left while its channel is still the live one does not count (ClientGoneQueue.count):
   * otherwise a wrapper killed with the link up would keep its broker from ever going idle.
   */
  get clientGonePending(): number {
    return this.clientGoneQueue.count(Date.now(), (on) => this.stillOnChannel(on));
  }

  private stillOnChannel(after: { link: DaemonLink; opened: number }): boolean {
    return after.link.connected && after.link.channelsOpened === after.opened && this.conns.some((c) => c.host.link === after.link);
  }

  /**
   * Sends the pending client-gone notices on the current channel. One flush at a time; a notice
   * added meanwhile is sent by the same flush before it ends (it may have been added just after
   * the flush's last look), and one that failed is tried again by deliverPending's next call.
   */
  private async flushClientGone(): Promise<void> {
    if (this.flushing) {
      this.flushAgain = true;
      return;
    }
    this.flushing = true;
    try {
      do {
        this.flushAgain = false;
        if (!(await this.flushOnce())) return;
      } while (this.flushAgain);
    } finally {
      this.flushing = false;
    }
  }

  /** One pass over the pending notices; false when one failed (the rest wait for the next try). */
  private async flushOnce(): Promise<boolean> {
    const conn = this.conns[0];
    if (!conn) return false;
    const link = conn.host.link;
    for (const [token, notice] of this.clientGoneQueue.due({ link, opened: link.channelsOpened })) {
      try {
        await this.noticeClientGone(link, streamHeader.clientGone(token, notice.gen));
        this.clientGone({ type: "confirmed", token, notice });
      } catch (err) {
        this.log(`reporting a gone client failed (tried again shortly): ${oneLine((err as Error).message)}`);
        return false;
      }
    }
    return true;
  }

  /**
   * Client-gone notices are pending: send them now when the daemon channel is up (a notice that
   * failed on a channel that stayed up would otherwise wait for the next channel, keeping its
   * workload alive for the whole grace), else reach for the host (a reconnect gives up after its window).
   */
  deliverPending(): void {
    if (this.conns[0]?.host.link.connected) void this.flushClientGone();
    else this.warmUp();
  }

  /** One client-gone notice: the daemon ends the stream once it has applied it (bounded). */
  private async noticeClientGone(link: DaemonLink, header: ClientGoneHeader): Promise<void> {
    const stream = await link.stream(header);
    stream.end();
    let timer: NodeJS.Timeout | undefined;
    const info = await Promise.race([
      new Promise<StreamClose>((resolve) => stream.once("close", resolve)),
      new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), NOTICE_WAIT_MS))),
    ]).finally(() => clearTimeout(timer));
    if (info?.reason === null) return;
    stream.reset("error");
    throw new RuntimeError(
      "network",
      info ? `the stream was lost (${info.message ?? info.reason})` : `no answer within ${NOTICE_WAIT_MS} ms`,
    );
  }

  /**
   * A channel to TCP `host`:`port` as the host reaches it over the first connection, or null at once when
   * the daemon's notices are not arriving (the link is down: a forward refuses, never hangs).
   */
  async forwardTcp(host: string, port: number): Promise<Duplex | null> {
    const conn = this.conns[0];
    if (!conn || conn.ssh.closed || !this.notices.up) return null;
    return conn.ssh.forwardTcp(host, port);
  }

  /** Reaches for the host until its notices arrive (at most `ms`): a fresh broker answers what the host holds. */
  async noticesArrived(ms: number): Promise<void> {
    if (this.notices.up) return;
    this.warmUp();
    await this.notices.whenUp(ms);
  }

  /** Opens the notices stream on `host`'s new channel (it replaces the previous channel's). */
  private async openNotices(host: SshHost): Promise<void> {
    if (this.closed || this.conns[0]?.host !== host) return;
    try {
      this.notices.attach(await host.link.stream(streamHeader.notices(this.notices.answers)));
    } catch (err) {
      this.log(`opening the notices stream failed: ${oneLine((err as Error).message)}`);
    }
  }

  /**
   * The daemon channel went while notices are held (forwards, watchers): it is reopened, so they
   * come back without waiting for an operation; a daemon that is gone is started again, and its
   * empty snapshot ends them.
   */
  private relinkForNotices(host: SshHost, ssh: CountedConnection, ms = NOTICES_RELINK_MS): void {
    if (this.notices.live === 0) return;
    setTimeout(() => {
      if (this.closed || ssh.closed || this.notices.live === 0 || host.link.connected || this.conns[0]?.host !== host) return;
      host.link.connect().catch((err: Error) => {
        this.log(`reaching the host daemon for its notices failed: ${oneLine(err.message)}`);
        this.relinkForNotices(host, ssh, 5 * NOTICES_RELINK_MS);
      });
    }, ms).unref();
  }

  /** Connects and reaches the daemon ahead of the first operation (once the broker won its socket). */
  warmUp(): void {
    this.primary()
      .then((c) => c.host.link.connect())
      .catch((err: Error) => this.log(`warming up failed: ${oneLine(err.message)}`));
  }

  private closeIdleExtras(): void {
    for (const c of this.conns.slice(1)) {
      if (c.leases === 0 && c.ssh.openChannels === 0 && Date.now() - c.lastUsed > EXTRA_IDLE_MS) {
        this.log("closing an idle extra connection");
        c.ssh.close();
      }
    }
  }

  /**
   * Conversations or PTYs in use, client-gone notices to deliver, or notices held (a forward the
   * broker serves); the daemon channel, its notices stream and a relay belong to nobody.
   */
  get busy(): boolean {
    return this.liveChannels > 0 || this.clientGonePending > 0 || this.notices.live > 0;
  }

  close(): void {
    this.closed = true;
    this.notices.reset();
    clearInterval(this.extraTimer);
    for (const c of this.conns) {
      c.host.link.close();
      c.ssh.close();
    }
    this.conns = [];
  }
}
