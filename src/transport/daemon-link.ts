// The Paseo side of the host daemon: ONE mux channel per SSH connection, over which every agent
// conversation of that connection runs as a stream. The channel is a stream-local forward to the
// daemon's socket (no host process), or, where sshd refuses that (AllowStreamLocalForwarding no,
// DisableForwarding, a socket path too long, not OpenSSH), `agent.cjs relay` on a session channel.
// daemon-up (through the fixed bootstrap command) starts the daemon when none answers; a reconnect
// first tries the socket it already knows, so a live daemon costs no process start.
import { Duplex } from "node:stream";
import { RuntimeError, oneLine } from "../shared/errors.js";
import { Mux, type MuxCloseCode, type MuxStream, type StreamClose } from "../shared/mux.js";
import { StreamHeader, streamHeader } from "../shared/agent-api.js";
import { AGENT_READY_TIMEOUT_MS, AgentChannel } from "./agent-channel.js";

/** The daemon's channel: the streams the Paseo side opens there are the StreamHeader kinds. */
type DaemonMux = Mux<StreamHeader>;

export interface DaemonInfo {
  /** Absolute path of the daemon's socket on the host. */
  socket: string;
  pid: number;
}

/** What a link needs from the host it reaches (SshHost provides it). */
export interface DaemonStarter {
  readonly target: string;
  /** The agent build the daemon must run (its hash). */
  readonly build: string;
  /** Whether the SSH connection under the channel is gone (tells link loss from daemon death). */
  readonly connectionClosed: boolean;
  /** Runs daemon-up: makes sure the daemon of this build runs; where it listens. */
  daemonUp(): Promise<DaemonInfo>;
  /** A stream-local channel to `socket` (rejects when the server refuses it). */
  forward(socket: string): Promise<Duplex>;
  /** `agent.cjs relay` on a session channel, its bytes starting after the ready marker. */
  relay(): Promise<Duplex>;
}

export type LinkTransport = "stream-local" | "relay";

export interface LinkHooks {
  log?(line: string): void;
  /** The mux channel closed (every stream on it was lost with it). */
  onLost?(why: string, code: MuxCloseCode): void;
  /** A mux channel to the daemon was (re-)established. */
  onConnected?(): void;
}

/** The link's lifecycle: at most one current mux channel, opened by at most one attempt at a time. */
export type LinkState =
  /** No channel: none opened yet, or the last one was lost or said GOAWAY. */
  | { kind: "idle" }
  | { kind: "opening"; opening: Promise<DaemonMux> }
  | { kind: "connected"; mux: DaemonMux }
  /** close() was called: nothing opens any more. */
  | { kind: "closed" };

export type LinkEvent =
  | { type: "open"; opening: Promise<DaemonMux> }
  /** The handshake on `mux` succeeded. */
  | { type: "up"; mux: DaemonMux }
  | { type: "open-failed" }
  /** `mux` said GOAWAY or closed: it is current no more. */
  | { type: "gone"; mux: DaemonMux }
  | { type: "close" };

/** The one transition function of the link's lifecycle; an event the state cannot take is a bug. */
export function nextLinkState(s: LinkState, e: LinkEvent): LinkState {
  switch (e.type) {
    case "open":
      if (s.kind === "idle") return { kind: "opening", opening: e.opening };
      break;
    case "up":
      if (s.kind === "opening") return { kind: "connected", mux: e.mux };
      if (s.kind === "closed") return s;
      break;
    case "open-failed":
      if (s.kind === "opening") return { kind: "idle" };
      return s;
    case "gone":
      return s.kind === "connected" && s.mux === e.mux ? { kind: "idle" } : s;
    case "close":
      return { kind: "closed" };
  }
  throw new RuntimeError("remote", `internal error: the daemon link cannot take "${e.type}" while ${s.kind}`);
}

/**
 * Whether a channel's loss reads as the network's rather than the daemon's: its own SSH connection
 * is gone, or the mux's keepalive heard nothing from the peer.
 */
function lostWithTheNetwork(starter: DaemonStarter, info: StreamClose): boolean {
  return starter.connectionClosed || info.channel === "keepalive-timeout";
}

export class DaemonLink {
  private state: LinkState = { kind: "idle" };
  /** Channels whose daemon said GOAWAY, still carrying the streams opened before. */
  private readonly leaving = new Set<DaemonMux>();
  private socket: string | null = null;
  /** Set once this connection's server refused stream-local forwarding: every channel is a relay. */
  private relayOnly = false;
  /** How the current (or last) channel reaches the daemon. */
  transport: LinkTransport | null = null;
  /** Channels opened so far (1 + reconnects). */
  channelsOpened = 0;

  private readonly log: (line: string) => void;

  constructor(
    private readonly starter: DaemonStarter,
    private readonly keepaliveMs: number,
    private readonly hooks: LinkHooks = {},
  ) {
    this.log = hooks.log ?? (() => undefined);
  }

  private to(e: LinkEvent): LinkState {
    this.state = nextLinkState(this.state, e);
    return this.state;
  }

  private get mux(): DaemonMux | null {
    return this.state.kind === "connected" ? this.state.mux : null;
  }

  /** True while a mux channel is open. */
  get connected(): boolean {
    return this.mux !== null && !this.mux.closed;
  }

  /**
   * Whether the daemon channel still answers within `ms` (Mux.checkAlive): a silent one is closed
   * as dead, and the link's loss handling (reconnect, re-attach) takes over. No channel: true.
   */
  checkAlive(ms: number): Promise<boolean> {
    return this.mux?.checkAlive(ms) ?? Promise.resolve(true);
  }

  /** Open streams on the current channel. */
  get streamCount(): number {
    return this.mux?.streamCount ?? 0;
  }

  /** The daemon's pid, from its HELLO on the current channel. */
  get daemonPid(): number | null {
    return this.mux?.peerHello?.pid ?? null;
  }

  /** Opens one conversation stream, connecting (and starting the daemon) first when needed. */
  async stream(header: StreamHeader = streamHeader.agent): Promise<MuxStream<StreamHeader>> {
    const mux = await this.ensure();
    const stream = mux.open(header);
    stream.once("close", () => this.closeIfDrained(mux));
    return stream;
  }

  /** A channel the daemon said GOAWAY on is closed once its last stream ended. */
  private closeIfDrained(mux: DaemonMux): void {
    if (this.leaving.has(mux) && mux.streamCount === 0) mux.close("drained after GOAWAY");
  }

  /**
   * One agent conversation over a new stream, with the loss reason turned into a clear error
   * (`resumable`: a resumable exec's, whose loss just closes it: its wrapper re-attaches).
   */
  async agent(resumable = false): Promise<AgentChannel> {
    return this.agentOver(await this.stream(), resumable);
  }

  agentOver(stream: MuxStream, resumable = false): AgentChannel {
    const io = streamAsDuplex(stream);
    const ch = new AgentChannel({ stdin: io, stdout: io, destroy: () => io.destroy() }, { marker: false, peer: this.starter.target });
    stream.once("close", (info) => {
      if (info.reason === null || info.reason === "client-gone") return;
      if (resumable) ch.destroy();
      else ch.lose(this.lossError(info));
    });
    return ch;
  }

  /** The error a conversation that ended with `info` reports. */
  lossError(info: StreamClose): RuntimeError {
    const t = this.starter.target;
    const why = info.message ? ` (${info.message})` : "";
    if (info.reason === "link-lost") {
      if (lostWithTheNetwork(this.starter, info)) {
        return new RuntimeError("network", `connection to ${t} was lost${why}`);
      }
      return new RuntimeError("remote", `the host daemon on ${t} went away${why}; the operation it was running is lost`);
    }
    return new RuntimeError("remote", `the host daemon on ${t} ended the conversation: ${info.message ?? info.reason ?? "closed"}`);
  }

  /** Connects the channel now (starting the daemon, installing the agent first if needed). */
  async connect(): Promise<void> {
    await this.ensure();
  }

  private ensure(): Promise<DaemonMux> {
    const s = this.state;
    if (s.kind === "closed") return Promise.reject(new RuntimeError("network", `connection to ${this.starter.target} is closing`));
    if (s.kind === "connected" && !s.mux.closed) return Promise.resolve(s.mux);
    if (s.kind === "opening") return s.opening;
    if (s.kind === "connected") this.to({ type: "gone", mux: s.mux });
    const opening = this.open();
    this.to({ type: "open", opening });
    opening.catch(() => this.to({ type: "open-failed" }));
    return opening;
  }

  private async open(): Promise<DaemonMux> {
    if (this.socket !== null && !this.relayOnly) {
      // The daemon reached before is probably still there: no process start needed. If it is
      // just exiting (or gone), start over through daemon-up: nothing was opened on it yet.
      const known = await this.starter.forward(this.socket).catch(() => null);
      if (known) {
        const mux = await this.handshake(known, "stream-local").catch(() => null);
        if (mux) return mux;
      }
    }
    const info = await this.starter.daemonUp();
    this.socket = info.socket;
    if (!this.relayOnly) {
      let ch: Duplex | undefined;
      try {
        ch = await this.starter.forward(info.socket);
      } catch (err) {
        // The daemon answered daemon-up a moment ago: the server refuses the forward itself.
        this.relayOnly = true;
        this.log(`stream-local forwarding refused by ${this.starter.target} (${oneLine((err as Error).message)}); using a relay`);
      }
      if (ch) return this.handshake(ch, "stream-local");
    }
    return this.handshake(await this.starter.relay(), "relay");
  }

  private async handshake(channel: Duplex, how: LinkTransport): Promise<DaemonMux> {
    const mux: DaemonMux = new Mux(channel, {
      role: "client",
      build: this.starter.build,
      keepaliveMs: this.keepaliveMs,
      log: this.log,
      header: StreamHeader,
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      const hello = await Promise.race([
        mux.hello(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new RuntimeError("network", `the host daemon on ${this.starter.target} did not answer within ${AGENT_READY_TIMEOUT_MS} ms`),
              ),
            AGENT_READY_TIMEOUT_MS,
          );
        }),
      ]);
      if (hello.build !== this.starter.build) {
        throw new RuntimeError(
          "remote",
          `the host daemon on ${this.starter.target} runs build ${hello.build}, expected ${this.starter.build}`,
        );
      }
    } catch (err) {
      mux.close("handshake failed");
      throw err instanceof RuntimeError
        ? err
        : new RuntimeError("network", `the host daemon on ${this.starter.target} did not answer: ${oneLine(String(err))}`);
    } finally {
      clearTimeout(timer);
    }
    this.transport = how;
    this.channelsOpened++;
    // The daemon is about to exit when idle: open nothing more here (what is open carries on).
    mux.on("goaway", () => {
      if (this.mux !== mux) return;
      this.to({ type: "gone", mux });
      this.leaving.add(mux);
      this.closeIfDrained(mux);
    });
    mux.on("close", (why, code) => {
      this.leaving.delete(mux);
      this.to({ type: "gone", mux });
      if (this.state.kind === "closed") return;
      this.log(`channel to the host daemon closed: ${why}`);
      this.hooks.onLost?.(why, code);
    });
    if (this.state.kind === "closed") {
      mux.close("link closed");
      return mux;
    }
    this.to({ type: "up", mux });
    queueMicrotask(() => this.hooks.onConnected?.());
    return mux;
  }

  close(why = "link closed"): void {
    const mux = this.mux;
    this.to({ type: "close" });
    mux?.close(why);
    for (const m of this.leaving) m.close(why);
  }
}

/**
 * A mux stream as a node Duplex (for AgentChannel): reads pause the stream while the consumer is
 * behind, writes wait for the stream's drain, end() sends END, destroy() resets it as client-gone.
 */
export function streamAsDuplex(stream: MuxStream): Duplex {
  const io: Duplex = new Duplex({
    write(chunk: Buffer, _enc, cb) {
      if (stream.write(chunk)) cb();
      else void stream.drained().then(() => cb());
    },
    final(cb) {
      stream.end();
      cb();
    },
    read() {
      stream.resume();
    },
    destroy(err, cb) {
      stream.reset("client-gone");
      cb(err);
    },
  });
  stream.on("data", (d) => {
    if (!io.push(d)) stream.pause();
  });
  stream.on("end", () => io.push(null));
  stream.on("close", (info) => {
    if (info.reason !== null) io.destroy();
  });
  return io;
}
