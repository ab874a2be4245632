// The broker's SSH side: leases of agent and PTY channels to operations. Connections are built
// with the transport's connectSsh and SshHost (host-key and auth logic exist once); each counts
// its sessions (counted-connection.ts) so none carries more than MaxSessions, extra connections
// open beyond that, and a lost link is re-established with backoff (reconnect.ts). A few
// pre-started agent channels (one, growing to three with demand) let an operation skip channel
// set-up and agent start.
import { EventEmitter } from "node:events";
import { RuntimeError, oneLine } from "../shared/errors.js";
import type { RuntimeOptions } from "../transport/options.js";
import type { ConnectionPlan } from "../transport/ssh-config/resolve.js";
import type { AgentChannel } from "../transport/agent-channel.js";
import type { PtyChannel, PtyRequest } from "../transport/host.js";
import { agentBundle } from "../transport/bootstrap.js";
import { connectSsh } from "../transport/ssh-connection.js";
import { SshHost } from "../transport/ssh-host.js";
import { ACQUIRE_WAIT_MS } from "./wire.js";
import { CountedConnection } from "./counted-connection.js";
import { reconnect } from "./reconnect.js";

/** More connections than this per broker and operations queue instead. */
export const MAX_CONNECTIONS = 16;
/** At most this many pre-started agent channels on the first connection. */
export const SPARE_AGENTS = 3;
/** Bound for waiting on an agent that is already starting instead of starting another. */
const SPARE_WAIT_MS = 20_000;
/** Extra connections close after being unused this long. */
const EXTRA_IDLE_MS = 10_000;

interface Conn {
  ssh: CountedConnection;
  host: SshHost;
  /** Operations holding a channel (or about to open one) on this connection. */
  leases: number;
  spares: AgentChannel[];
  sparesOpening: number;
  lastUsed: number;
}

export interface Lease<T> {
  channel: T;
  /** Call once the channel has closed (the session slot is then free again). */
  release(): void;
}

export class ChannelPool extends EventEmitter<{ change: []; log: [string]; unreachable: [] }> {
  private conns: Conn[] = [];
  private connecting: Promise<Conn> | undefined;
  /** An extra connection being opened because every existing one is full. */
  private extra: Promise<Conn> | undefined;
  /** True once a connection has existed: later connects are reconnects and retry with backoff. */
  private everConnected = false;
  /** The first agent start may install the agent; others wait for it instead of racing uploads. */
  private agentWarm: Promise<void> | undefined;
  private agentReady = false;
  private spareTarget = 1;
  /** Operations waiting for a starting spare rather than opening a channel of their own. */
  private spareWaiters = 0;
  private closed = false;
  handshakes = 0;
  private readonly limit: number;
  private readonly bundle = agentBundle();
  private readonly extraTimer: NodeJS.Timeout;

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
  }

  get liveChannels(): number {
    return this.conns.reduce((n, c) => n + c.leases, 0);
  }

  get spareChannels(): number {
    return this.conns.reduce((n, c) => n + c.spares.length, 0);
  }

  get connectionCount(): number {
    return this.conns.length;
  }

  private used(c: Conn): number {
    return Math.max(c.leases + c.spares.length + c.sparesOpening, c.ssh.openChannels);
  }

  private log(line: string): void {
    this.emit("log", line);
  }

  private async connectOnce(): Promise<Conn> {
    const base = await connectSsh(this.options, {}, this.plan, this.proxyEnv);
    this.handshakes++;
    const ssh = new CountedConnection(base, () => this.emit("change"));
    const conn: Conn = {
      ssh,
      host: new SshHost(ssh, this.options, this.bundle),
      leases: 0,
      spares: [],
      sparesOpening: 0,
      lastUsed: Date.now(),
    };
    ssh.client.once("close", () => this.dropped(conn));
    this.conns.push(conn);
    this.everConnected = true;
    this.log(`connected to ${ssh.target} (${this.conns.length} connection(s))`);
    if (this.conns.length === 1) this.refillSpares();
    return conn;
  }

  private dropped(conn: Conn): void {
    const at = this.conns.indexOf(conn);
    if (at < 0) return;
    this.conns.splice(at, 1);
    conn.spares = [];
    this.log(`connection to ${conn.ssh.target} closed (${this.conns.length} left)`);
    this.emit("change");
    // Reconnect right away so the next operation finds a connection waiting.
    if (!this.closed && this.conns.length === 0) {
      this.connect().catch((err: Error) => {
        this.log(oneLine(err.message));
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
          log: (line) => this.log(line),
        })
      : this.connectOnce();
    this.connecting = attempt.finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async ensureConnected(): Promise<void> {
    if (this.conns.length === 0) await this.connect();
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
  private async reserve(forPty: boolean): Promise<Conn> {
    const until = Date.now() + ACQUIRE_WAIT_MS;
    for (;;) {
      if (this.closed) throw new RuntimeError("network", "SSH broker is shutting down; rerun the operation");
      await this.ensureConnected();
      const free = this.conns.find((c) => this.used(c) < this.limit);
      if (free) {
        free.leases++;
        free.lastUsed = Date.now();
        return free;
      }
      // A PTY cannot use a pre-started agent: give up a spare's slot for it.
      const withSpare = forPty ? this.conns.find((c) => c.spares.length > 0) : undefined;
      if (withSpare) {
        withSpare.spares.shift()!.destroy();
        await this.waitForChange(Math.min(until, Date.now() + 2000));
        continue;
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

  private takeSpare(): Lease<AgentChannel> | undefined {
    for (const conn of this.conns) {
      while (conn.spares.length > 0) {
        const ch = conn.spares.shift()!;
        if (ch.closed) continue;
        conn.leases++;
        conn.lastUsed = Date.now();
        this.refillSpares();
        return { channel: ch, release: this.releaser(conn) };
      }
    }
    return undefined;
  }

  /** Starts one agent and parks it as a spare on `conn`. */
  private openSpare(conn: Conn): Promise<void> {
    conn.sparesOpening++;
    return conn.host
      .openAgent()
      .then((ch) => {
        if (this.closed || !this.conns.includes(conn)) return ch.destroy();
        conn.spares.push(ch);
        ch.once("close", () => {
          const i = conn.spares.indexOf(ch);
          if (i >= 0) conn.spares.splice(i, 1);
          this.emit("change");
        });
      })
      .finally(() => {
        conn.sparesOpening--;
        this.emit("change");
      });
  }

  /**
   * Keeps `spareTarget` started agents on the first connection while it has room for them. The
   * target starts at one and grows (up to SPARE_AGENTS) each time an operation finds none ready,
   * so a host used one operation at a time does not keep idle agents it never needs.
   */
  private refillSpares(): void {
    const conn = this.conns[0];
    if (!conn || this.closed || !this.agentReady) return;
    while (conn.spares.length + conn.sparesOpening < this.spareTarget && this.used(conn) + 1 < this.limit) {
      this.openSpare(conn).catch((err: Error) => this.log(`pre-starting an agent failed: ${oneLine(err.message)}`));
    }
  }

  /**
   * The first agent start may install the agent on the host; it runs alone (everyone else waits
   * for it) so concurrent first operations never race uploads. Its agent becomes a spare.
   */
  private warmAgent(): Promise<void> {
    if (!this.agentWarm) {
      this.agentWarm = this.ensureConnected().then(() => this.openSpare(this.conns[0]!));
      this.agentWarm.then(
        () => {
          this.agentReady = true;
          this.refillSpares();
        },
        (err: Error) => {
          this.log(`starting the first agent failed: ${oneLine(err.message)}`);
          this.agentWarm = undefined;
        },
      );
    }
    return this.agentWarm;
  }

  async agent(): Promise<Lease<AgentChannel>> {
    // The first agent's failure (no node, install failed) is this operation's failure too.
    await this.warmAgent();
    let spare = this.takeSpare();
    if (spare) return spare;
    this.spareTarget = Math.min(SPARE_AGENTS, this.spareTarget + 1);
    // An agent that is already starting is ready sooner than a new channel would be: wait for it,
    // unless earlier operations have already claimed every one that is starting.
    if (this.spareWaiters < this.conns.reduce((n, c) => n + c.sparesOpening, 0)) {
      this.spareWaiters++;
      try {
        const until = Date.now() + SPARE_WAIT_MS;
        while (!spare && Date.now() < until && this.conns.some((c) => c.sparesOpening > 0)) {
          await this.waitForChange(until);
          spare = this.takeSpare();
        }
      } finally {
        this.spareWaiters--;
      }
      if (spare) return spare;
    }
    const conn = await this.reserve(false);
    const release = this.releaser(conn);
    try {
      const channel = await conn.host.openAgent();
      this.refillSpares();
      return { channel, release };
    } catch (err) {
      release();
      throw err;
    }
  }

  async pty(args: string[], req: PtyRequest): Promise<Lease<PtyChannel>> {
    await this.warmAgent();
    const conn = await this.reserve(true);
    const release = this.releaser(conn);
    try {
      return { channel: await conn.host.openPty(args, req), release };
    } catch (err) {
      release();
      throw err;
    }
  }

  /** Connects ahead of the first operation (the broker does this as soon as it has won its socket). */
  warmUp(): void {
    this.warmAgent().catch(() => undefined);
  }

  private closeIdleExtras(): void {
    for (const c of this.conns.slice(1)) {
      if (c.leases === 0 && c.ssh.openChannels === 0 && Date.now() - c.lastUsed > EXTRA_IDLE_MS) {
        this.log("closing an idle extra connection");
        c.ssh.close();
      }
    }
  }

  /** Channels that belong to operations (spares do not count: closing them harms nobody). */
  get busy(): boolean {
    return this.liveChannels > 0 || this.conns.some((c) => c.ssh.openChannels > c.spares.length + c.sparesOpening);
  }

  close(): void {
    this.closed = true;
    clearInterval(this.extraTimer);
    for (const c of this.conns) {
      for (const s of c.spares) s.destroy();
      c.ssh.close();
    }
    this.conns = [];
  }
}
