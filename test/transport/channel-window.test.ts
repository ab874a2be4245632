// A forwarded port's channel window (src/transport/ssh2-channel-window.ts, issue 29), through the
// broker's PortForwarder over a real SSH connection to the rig's sshd behind the bench's delay
// proxy (25 ms each way): downloads arrive byte-exact, the window grows past ssh2's 2 MiB on that
// link, a reader that stops leaves at most the window waiting here, and half-closes and resets
// cross as before. The host's server is on this machine's loopback (the rig's sshd is local), so
// the forward listens on the next free port: `view` says which.
import { createHash, randomBytes } from "node:crypto";
import { connect, createServer, type Server, type Socket } from "node:net";
import { Duplex, PassThrough } from "node:stream";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { PortForwarder } from "../../src/broker/process/port-forwards.js";
import { connectSsh, type SshConnection } from "../../src/transport/ssh-connection.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { INITIAL_WINDOW, MAX_WINDOW, pipeChannel } from "../../src/transport/ssh2-channel-window.js";
import type { KindNotice } from "../../src/shared/agent-api.js";
import { rigOptions } from "../rig/rig.js";
import { throughProxy } from "../support/host-daemon.js";
import { needs, unless } from "../support/needs.js";

const skip =
  needs.openssh("the window is measured against OpenSSH's sshd (the embedded server's channels pace differently)") ??
  needs.localHost("the host's server listens on this machine's loopback, which the rig's sshd reaches");
const MiB = 1024 * 1024;
/** One block repeated; each connection's bytes are its offset-dependent pattern (hashes differ per slice). */
const BLOCK = randomBytes(MiB);

const cleanups = suite("all", 30_000);
let conn: SshConnection;
/** Every channel the forwarder opened, newest last (their window is looked at). */
const channels: Duplex[] = [];
let forwarder: PortForwarder;

/** A server on 127.0.0.1 that runs `onConn` for each connection; resolves with its port. */
async function serve(onConn: (c: Socket) => void): Promise<number> {
  const conns = new Set<Socket>();
  const s: Server = createServer({ allowHalfOpen: true }, (c) => {
    conns.add(c);
    c.on("error", () => undefined);
    onConn(c);
  });
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  cleanups.push(() => {
    s.close();
    for (const c of conns) c.destroy();
  });
  return (s.address() as { port: number }).port;
}

/** Writes `bytes` of BLOCK's pattern to `c` with backpressure, then `after` (default: end). */
function send(c: Socket, bytes: number, after: (c: Socket) => void = (s) => s.end()): void {
  let left = bytes;
  const w = () => {
    while (left > 0) {
      const n = Math.min(left, BLOCK.length);
      left -= n;
      if (!c.write(BLOCK.subarray(0, n))) return void c.once("drain", w);
    }
    after(c);
  };
  w();
}

function digestOf(bytes: number): string {
  const h = createHash("sha256");
  for (let left = bytes; left > 0; left -= Math.min(left, BLOCK.length)) h.update(BLOCK.subarray(0, Math.min(left, BLOCK.length)));
  return h.digest("hex");
}

let key = 0;
/** Forwards host port `port` and resolves with the local port it answers on. */
async function forward(port: number): Promise<number> {
  const n: KindNotice<"ports"> = { kind: "ports", key: `k${key++}`, ports: [{ port, pid: 1, argv0: "node", since: 0 }] };
  forwarder.handle(n);
  cleanups.push(() => forwarder.handle({ kind: "ports", key: n.key, gone: true }));
  for (let i = 0; i < 200; i++) {
    const f = forwarder.view(n).forwards.find((x) => x.hostPort === port);
    if (f) return f.localPort;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`host port ${port} was not forwarded`);
}

/** Reads a connection to `port` to its end: bytes, digest, how it ended. */
function download(port: number, opts: { request?: string; halfClose?: boolean; onSocket?: (s: Socket) => void } = {}) {
  return new Promise<{ bytes: number; digest: string; ms: number; ended: "end" | "error" | "close"; text: string }>((resolve) => {
    const t0 = performance.now();
    const h = createHash("sha256");
    let bytes = 0;
    let text = "";
    const s = connect({ host: "127.0.0.1", port, allowHalfOpen: true });
    opts.onSocket?.(s);
    s.on("connect", () => {
      if (opts.request !== undefined) s.write(opts.request);
      if (opts.halfClose) s.end();
    });
    s.on("data", (d: Buffer) => {
      h.update(d);
      bytes += d.length;
      if (text.length < 200) text += d.subarray(0, 200 - text.length).toString("latin1");
    });
    let settled = false;
    const done = (ended: "end" | "error" | "close") => {
      if (settled) return;
      settled = true;
      s.destroy();
      resolve({ bytes, digest: h.digest("hex"), ms: performance.now() - t0, ended, text });
    };
    s.once("end", () => done("end"));
    s.once("error", () => done("error"));
    s.once("close", () => done("close"));
  });
}

beforeAll(async () => {
  if (skip) return;
  const { options } = await throughProxy(cleanups, {}, 25);
  conn = await connectSsh(parseRuntimeOptions(rigOptions({ ...options, broker: false })));
  cleanups.push(() => conn.close());
  forwarder = new PortForwarder({
    open: async (h, p) => {
      const ch = await conn.forwardTcp(h, p);
      channels.push(ch);
      return ch;
    },
    forwardPorts: true,
    log: () => undefined,
  });
}, 60_000);

/** ssh2's channel internals the window module uses (read here to see what it did). */
const windowOf = (ch: Duplex) => (ch as unknown as { incoming: { window: number } }).incoming.window;

describe("a forwarded port's channel window, behind 50 ms RTT", unless(skip), () => {
  it("48 MiB arrive byte-exact and the window grows past ssh2's 2 MiB (to MAX_WINDOW at most)", async () => {
    const bytes = 48 * MiB;
    const local = await forward(await serve((c) => send(c, bytes)));
    let most = 0;
    const watch = setInterval(() => (most = Math.max(most, channels.length ? windowOf(channels.at(-1)!) : 0)), 5);
    const r = await download(local).finally(() => clearInterval(watch));
    console.log(`48 MiB through the forward at 50 ms RTT: ${((bytes / MiB / r.ms) * 1000).toFixed(1)} MiB/s; largest window seen ${most}`);
    expect({ bytes: r.bytes, digest: r.digest, ended: r.ended }).toEqual({ bytes, digest: digestOf(bytes), ended: "end" });
    expect(most).toBeGreaterThan(INITIAL_WINDOW);
    expect(most).toBeLessThanOrEqual(MAX_WINDOW);
  }, 120_000);

  it("a reader that stops for 3 s: what waits here stays within the window, and every byte arrives after", async () => {
    const bytes = 96 * MiB;
    const local = await forward(await serve((c) => send(c, bytes)));
    let sock!: Socket;
    const got = download(local, { onSocket: (s) => (sock = s) });
    // Read a little (the window has grown by then or not: either way it is bounded), then stop.
    await new Promise((r) => setTimeout(r, 300));
    sock.pause();
    const ch = channels.at(-1)!;
    const before = process.memoryUsage().arrayBuffers;
    let waitingMost = 0;
    for (let i = 0; i < 30; i++) {
      await new Promise((r) => setTimeout(r, 100));
      // Bytes here for the local socket, and credit the server still has: together never above the window.
      waitingMost = Math.max(waitingMost, ch.readableLength + Math.max(0, windowOf(ch)));
    }
    // (Array buffers are logged only: garbage not yet collected and this process's own server and
    // delay proxy count there too.)
    const grew = process.memoryUsage().arrayBuffers - before;
    console.log(`stopped reader: at most ${waitingMost} bytes waiting or owed here; array buffers +${(grew / MiB).toFixed(1)} MiB`);
    expect(waitingMost).toBeLessThanOrEqual(MAX_WINDOW);
    sock.resume();
    const r = await got;
    expect({ bytes: r.bytes, digest: r.digest, ended: r.ended }).toEqual({ bytes, digest: digestOf(bytes), ended: "end" });
  }, 120_000);

  it("half-close: the request's end reaches the server, whose answer then arrives whole", async () => {
    const local = await forward(
      await serve((c) => {
        const h = createHash("sha256");
        c.on("data", (d: Buffer) => h.update(d));
        c.on("end", () => {
          c.write(`${h.digest("hex")}\n`);
          send(c, 4 * MiB);
        });
      }),
    );
    const request = randomBytes(300_000).toString("hex");
    const r = await download(local, { request, halfClose: true });
    const line = `${createHash("sha256").update(request).digest("hex")}\n`;
    expect(r.text.slice(0, line.length)).toBe(line);
    expect(r.bytes).toBe(line.length + 4 * MiB);
    expect(r.ended).toBe("end");
  }, 60_000);

  it("resets cross: the server's mid-download ends the local connection, and the local one's closes the server's", async () => {
    const serverSide = await serve((c) => send(c, 8 * MiB, (s) => s.resetAndDestroy()));
    const a = await download(await forward(serverSide));
    expect(a.bytes).toBeLessThanOrEqual(8 * MiB);
    expect(a.ended === "end" || a.ended === "error" || a.ended === "close").toBe(true);

    let closedAt = 0;
    const local = await forward(
      await serve((c) => {
        c.on("close", () => (closedAt = Date.now()));
        send(c, 256 * MiB);
      }),
    );
    let sock!: Socket;
    const got = download(local, { onSocket: (s) => (sock = s) });
    await new Promise((r) => setTimeout(r, 500));
    const resetAt = Date.now();
    sock.resetAndDestroy();
    await got;
    for (let i = 0; i < 100 && !closedAt; i++) await new Promise((r) => setTimeout(r, 50));
    expect(closedAt).toBeGreaterThan(0);
    expect(closedAt - resetAt).toBeLessThan(3000);
  }, 60_000);
});

describe("a stream that is not an ssh2 channel", () => {
  it("is piped both ways with its own flow control", async () => {
    const toHost = new PassThrough();
    const fromHost = new PassThrough();
    const ch = Duplex.from({ writable: toHost, readable: fromHost });
    const peerGot: Buffer[] = [];
    const s = await serve((c) => {
      c.on("data", (d: Buffer) => peerGot.push(d));
      c.write("up");
    });
    const sock = connect({ host: "127.0.0.1", port: s });
    await new Promise((r) => sock.once("connect", r));
    expect(pipeChannel(ch, sock)).toBe(false);
    const up: Buffer[] = [];
    toHost.on("data", (d: Buffer) => up.push(d));
    fromHost.write("down");
    await new Promise((r) => setTimeout(r, 200));
    expect({ up: Buffer.concat(up).toString(), down: Buffer.concat(peerGot).toString() }).toEqual({ up: "up", down: "down" });
    sock.destroy();
  });
});
