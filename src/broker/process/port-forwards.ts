// Servers on the host reached from the Paseo side at the same port: the broker's handler of "ports"
// notices (the daemon's port watch publishes, per key, the ports that key's processes listen on).
// The broker holds the forwards because it holds the host's SSH connection and outlives every
// operation: each forwarded port listens on 127.0.0.1 and ::1 here (loopback only; the next free
// port when the same number is taken, a privileged one from 10000 above it), and each accepted
// connection becomes a `direct-tcpip` channel to P on the host's loopback (127.0.0.1, or ::1 for a
// server that listens there only). While the daemon's
// notices are not arriving (link down) a connection is reset at once instead of waiting.
// The broker knows nothing of workspaces: keys are opaque here.
import { createServer, type Server, type Socket } from "node:net";
import { oneLine } from "../../shared/errors.js";
import type { KindNotice } from "../../shared/agent-api.js";
import type { Duplex } from "node:stream";
import { pipeChannel } from "../../transport/ssh2-channel-window.js";

/** How many local ports are tried for one host port before it is given up (and logged). */
const MAX_TRIES = 100;
/** A privileged host port is forwarded from this far above it (80 → 10080). */
const PRIVILEGED_OFFSET = 10_000;

interface ForwardView {
  hostPort: number;
  localPort: number;
  pid: number;
  argv0: string;
  since: number;
  /** Paseo named it in the exec's env (PASEO_PORT, …). */
  named: boolean;
}

interface PortForwarderDeps {
  /** A channel to `host`:`port` as the host reaches it; null when the link is down (refused at once). */
  open(host: string, port: number): Promise<Duplex | null>;
  /** `true`, `false` or the host ports to forward (runtime option forwardPorts). */
  forwardPorts: boolean | number[];
  log(line: string): void;
}

/** Who listens, and the address on the host a connection goes to. */
interface Who {
  pid: number;
  argv0: string;
  since: number;
  target: string;
  named: boolean;
}

/**
 * Where on the host to connect: 127.0.0.1 when the server takes IPv4 (bound to it, to 0.0.0.0, or
 * to :: which takes both), ::1 when that is all it listens on. Not "localhost": what it resolves
 * to on the host (/etc/hosts) decides whether sshd ever tries ::1.
 */
function targetOf(addresses: string[] | undefined): string {
  const a = addresses ?? [];
  return a.length > 0 && a.every((x) => x === "::1") ? "::1" : "127.0.0.1";
}

interface Forward extends Who {
  hostPort: number;
  localPort: number;
  servers: Server[];
  sockets: Set<Socket>;
}

function listenOn(host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer({ allowHalfOpen: true, noDelay: true });
    server.once("error", reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off("error", reject);
      resolve(server);
    });
  });
}

/** Listens on 127.0.0.1 and ::1 at the first port from `start` free on both (::1 only where IPv6 is there). */
async function listenPair(start: number): Promise<Server[] | null> {
  for (let port = start, tries = 0; port <= 65_535 && tries < MAX_TRIES; port++, tries++) {
    const v4 = await listenOn("127.0.0.1", port).catch(() => null);
    if (!v4) continue;
    const v6 = await listenOn("::1", port).catch((err: NodeJS.ErrnoException) => err);
    if (!(v6 instanceof Error)) return [v4, v6];
    if (v6.code === "EADDRINUSE" || v6.code === "EACCES") {
      v4.close();
      continue;
    }
    return [v4]; // no IPv6 loopback on this machine
  }
  return null;
}

export class PortForwarder {
  /** key → host port → its forward (a promise while it is being set up). */
  private readonly forwards = new Map<string, Map<number, Forward>>();
  /** Notices are applied one after another (setting a forward up waits for listen). */
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly deps: PortForwarderDeps) {}

  /** The registry's handler for kind "ports". */
  readonly handle = (n: KindNotice<"ports">): void => {
    const wanted = new Map<number, Who>();
    if (!n.gone) {
      // Named ports first: set up one after another, they are listening here before the rest.
      const ports = [...n.ports].sort((a, b) => Number(b.named === true) - Number(a.named === true));
      for (const p of ports) {
        const named = p.named === true;
        if (this.allowed(p.port, named)) {
          wanted.set(p.port, { pid: p.pid, argv0: p.argv0, since: p.since, target: targetOf(p.addresses), named });
        }
      }
    }
    this.chain = this.chain
      .then(() => this.apply(n.key, wanted))
      .catch((err: Error) => this.deps.log(`forwarding: ${oneLine(err.message)}`));
  };

  /** The registry's view of a "ports" notice: what is forwarded where. */
  readonly view = (n: KindNotice<"ports">): { forwards: ForwardView[] } => ({
    forwards: [...(this.forwards.get(n.key)?.values() ?? [])].map((f) => ({
      hostPort: f.hostPort,
      localPort: f.localPort,
      pid: f.pid,
      argv0: f.argv0,
      since: f.since,
      named: f.named,
    })),
  });

  /** forwardPorts false: none; a list: those, and the ports Paseo named (its previews dial them). */
  private allowed(port: number, named: boolean): boolean {
    const f = this.deps.forwardPorts;
    return f === true || (Array.isArray(f) && (named || f.includes(port)));
  }

  private async apply(key: string, wanted: Map<number, Who>): Promise<void> {
    const held = this.forwards.get(key) ?? new Map<number, Forward>();
    for (const [port, f] of held) {
      if (wanted.has(port)) continue;
      this.end(f);
      held.delete(port);
    }
    for (const [port, who] of wanted) {
      const f = held.get(port);
      if (f) {
        f.pid = who.pid;
        f.argv0 = who.argv0;
        f.target = who.target;
        f.named = who.named;
        continue;
      }
      const servers = await listenPair(port < 1024 ? port + PRIVILEGED_OFFSET : port);
      if (!servers) {
        this.deps.log(`no free local port near ${port} to forward host port ${port} to`);
        continue;
      }
      const localPort = (servers[0]!.address() as { port: number }).port;
      const fwd: Forward = { hostPort: port, localPort, servers, sockets: new Set(), ...who };
      for (const s of servers) s.on("connection", (sock) => this.accept(fwd, sock));
      held.set(port, fwd);
      this.deps.log(`forwarding host port ${port} to 127.0.0.1:${localPort}${localPort !== port ? " (its own number is taken here)" : ""}`);
    }
    if (held.size > 0) this.forwards.set(key, held);
    else this.forwards.delete(key);
  }

  private end(f: Forward): void {
    for (const s of f.servers) s.close();
    for (const sock of f.sockets) sock.destroy();
    this.deps.log(`stopped forwarding host port ${f.hostPort} (127.0.0.1:${f.localPort})`);
  }

  private accept(f: Forward, sock: Socket): void {
    f.sockets.add(sock);
    sock.once("close", () => f.sockets.delete(sock));
    sock.on("error", () => undefined);
    const asked = performance.now();
    this.deps.open(f.target, f.hostPort).then(
      (ch) => {
        if (!ch) return sock.resetAndDestroy();
        if (sock.destroyed) return ch.destroy();
        ch.on("error", () => sock.destroy());
        sock.once("close", () => ch.destroy());
        ch.once("close", () => sock.destroy());
        // Both ways, and the channel's receive window kept open as OpenSSH's client keeps it (the
        // open took one round trip: a long one lets the window grow).
        pipeChannel(ch, sock, { rttMs: performance.now() - asked });
      },
      (err: Error) => {
        this.deps.log(`a connection to forwarded port ${f.hostPort} failed: ${oneLine(err.message)}`);
        sock.resetAndDestroy();
      },
    );
  }
}
