// An in-process double of the SSH link between the Paseo host and the host daemon, with the faults
// the resume rules must survive, so they can be unit-tested in seconds beside the real-sshd suites
// (test/daemon/resume.test.ts, long-outage.test.ts):
//  * reset: every open connection dies at once (bytes in flight are lost, both ends see an error),
//    and new connections are refused until heal();
//  * blackhole: bytes (and FIN, and a close) stop arriving without either end hearing anything, as
//    when a route dies; a connection still open on both ends when heal() comes delivers what was
//    held, as TCP retransmission would; new connections time out meanwhile;
//  * slow: every chunk is delayed and the throughput limited, so frames are in flight when a fault hits.
// Each connection is a pair of node Duplexes: the Paseo side's end goes under DaemonLink's mux
// (through the DaemonStarter below), the other end to whatever plays the daemon.
import { Duplex } from "node:stream";
import { RuntimeError } from "../../src/shared/errors.js";
import type { DaemonInfo, DaemonStarter } from "../../src/transport/daemon-link.js";

type Item = Buffer | "fin" | "close";
type Mode = "up" | "reset" | "blackhole";
/** How one end of a connection closed: by its own side, by the peer's close arriving, or by a reset. */
export type EndFate = "open" | "own" | "peer" | "reset";

export interface SlowLink {
  /** Added to every chunk's trip. */
  delayMs: number;
  /** Throughput limit (0: none). */
  bytesPerSecond?: number;
}

/**
 * One direction of one connection: an ordered queue toward `to`, paced by the network's mode. A
 * slow link delays each chunk by `delayMs` (latency: chunks travel together) and spaces them by
 * their size at `bytesPerSecond` (throughput: one after another).
 */
class Lane {
  private readonly queue: Array<{ item: Item; due: number }> = [];
  private lastDue = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Bytes that reached the other end. */
  delivered = 0;

  constructor(
    private readonly net: FaultNetwork,
    private readonly to: () => Duplex,
    /** The receiving end is being closed by what arrived (not by its own side). */
    private readonly closing: () => void,
  ) {}

  put(item: Item): void {
    const slow = this.net.slowness;
    const now = Date.now();
    const bytes = Buffer.isBuffer(item) ? item.length : 0;
    const due = slow ? Math.max(now + slow.delayMs, this.lastDue) + (slow.bytesPerSecond ? (bytes * 1000) / slow.bytesPerSecond : 0) : now;
    this.lastDue = due;
    this.queue.push({ item, due });
    this.pump();
  }

  drop(): void {
    this.queue.length = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  pump(): void {
    while (!this.timer && this.net.mode === "up" && this.queue.length > 0) {
      const wait = this.queue[0]!.due - Date.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = null;
          this.pump();
        }, wait);
        return;
      }
      this.deliver(this.queue.shift()!.item);
    }
  }

  private deliver(item: Item): void {
    const to = this.to();
    if (to.destroyed) return;
    if (item === "fin") to.push(null);
    else if (item === "close") {
      this.closing();
      to.destroy();
    } else {
      this.delivered += item.length;
      to.push(item);
    }
  }
}

/** One connection: `paseo` is the runtime's end, `daemon` the far end. */
export class FaultConnection {
  readonly paseo: Duplex;
  readonly daemon: Duplex;
  private readonly lanes: Lane[];
  /** How each end closed (who declared the connection dead). */
  readonly fate: Record<"paseo" | "daemon", EndFate> = { paseo: "open", daemon: "open" };

  constructor(net: FaultNetwork) {
    const toDaemon = new Lane(
      net,
      () => this.daemon,
      () => this.closing("daemon", "peer"),
    );
    const toPaseo = new Lane(
      net,
      () => this.paseo,
      () => this.closing("paseo", "peer"),
    );
    this.lanes = [toDaemon, toPaseo];
    const end = (name: "paseo" | "daemon", out: Lane) =>
      new Duplex({
        write: (chunk: Buffer, _enc, cb) => {
          out.put(Buffer.from(chunk));
          cb();
        },
        final: (cb) => {
          out.put("fin");
          cb();
        },
        read: () => undefined,
        destroy: (err, cb) => {
          this.closing(name, "own");
          out.put("close");
          cb(err);
        },
      });
    this.paseo = end("paseo", toDaemon);
    this.daemon = end("daemon", toPaseo);
  }

  private closing(end: "paseo" | "daemon", how: EndFate): void {
    if (this.fate[end] === "open") this.fate[end] = how;
  }

  /** Bytes delivered toward the daemon and toward Paseo. */
  get delivered(): { toDaemon: number; toPaseo: number } {
    return { toDaemon: this.lanes[0]!.delivered, toPaseo: this.lanes[1]!.delivered };
  }

  pump(): void {
    for (const l of this.lanes) l.pump();
  }

  reset(): void {
    this.closing("paseo", "reset");
    this.closing("daemon", "reset");
    for (const l of this.lanes) l.drop();
    for (const end of [this.paseo, this.daemon]) {
      if (!end.destroyed) end.destroy(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }));
    }
    // The ends' own close markers were queued by destroy(): a reset connection carries nothing more.
    for (const l of this.lanes) l.drop();
  }
}

/** The network between the Paseo host and one host: its connections and its faults. */
export class FaultNetwork {
  mode: Mode = "up";
  slowness: SlowLink | null = null;
  readonly connections: FaultConnection[] = [];
  /** Dials refused or timed out (attempts made during an outage). */
  failedDials = 0;

  constructor(
    /** Whoever plays the daemon gets the far end of every connection. */
    private readonly accept: (daemonEnd: Duplex) => void,
    /** How long a dial into a blackhole hangs before it fails. */
    private readonly dialTimeoutMs = 100,
  ) {}

  /** A new connection (an SSH channel to the daemon's socket), or the failure an outage gives. */
  async dial(): Promise<Duplex> {
    if (this.mode === "reset") {
      this.failedDials++;
      throw new RuntimeError("network", "ssh: connect to host fault.test port 22: Connection refused");
    }
    if (this.mode === "blackhole") {
      this.failedDials++;
      await new Promise((r) => setTimeout(r, this.dialTimeoutMs));
      throw new RuntimeError("network", "ssh: connect to host fault.test port 22: Connection timed out");
    }
    const c = new FaultConnection(this);
    this.connections.push(c);
    this.accept(c.daemon);
    return c.paseo;
  }

  /** Kills every open connection now and refuses new ones until heal(). */
  reset(): void {
    this.mode = "reset";
    for (const c of this.connections) c.reset();
  }

  /** Silently stops every byte, FIN and close until heal(); new connections time out. */
  blackhole(): void {
    this.mode = "blackhole";
  }

  /** Delays (and throttles) every chunk from now on; null: full speed again. */
  slow(s: SlowLink | null): void {
    this.slowness = s;
  }

  /** Ends the outage: what a blackhole held flows on where both ends are still open. */
  heal(): void {
    this.mode = "up";
    for (const c of this.connections) c.pump();
  }

  /** A DaemonStarter over this network: daemon-up and both channel kinds are a dial. */
  starter(build: string): DaemonStarter {
    const info: DaemonInfo = { socket: "/fault/daemon.sock", pid: 4242 };
    return {
      target: "fault.test",
      build,
      get connectionClosed() {
        return false;
      },
      daemonUp: async () => {
        if (this.mode !== "up") await this.dial(); // fails as the outage says
        return info;
      },
      forward: () => this.dial(),
      relay: () => this.dial(),
    };
  }
}
