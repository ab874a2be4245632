// A TCP proxy for the benchmark and the fault tests: it adds a fixed one-way delay in each
// direction (a realistic round-trip time between an SSH client and the local sshd) and can break
// the link the ways networks do: cutAll() closes every connection (FIN, or RST with
// { reset: true }), blackhole() stalls it — nothing crosses in either direction and new
// connections get no answer — until the returned function ends the outage, when everything held
// back flows again as TCP would deliver it after retransmission; refuse() resets every connection
// and stops listening (a host whose sshd is down: new connections are refused) until the returned
// function listens on the same port again. Only 127.0.0.1 targets; every run is bounded.
//
// As a module: `startDelayProxy({ targetPort, delayMs })` -> { port, cutAll(), blackhole(), refuse(), close() };
// `onForward({ direction: "up" | "down", bytes, receivedAt, sentAt })` (epoch ms) reports every
// chunk it passes on, which the bench's profiles use to see when bytes were on the wire.
// As a program: `node bench/delay-proxy.mjs <targetPort> <delayMs> [maxSeconds]` prints the port;
// with DELAY_PROXY_LOG=<file> it appends those reports there as JSON lines.
import { appendFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import { fileURLToPath } from "node:url";

/**
 * Forwards bytes from `from` to `to` `delayMs` later. Timers of equal duration fire in insertion
 * order, so the byte order is kept without a queue of our own. While `held()` is true the bytes
 * wait in `parked` (and the source is paused, so the sender's TCP window fills like on a dead link).
 */
function pipeDelayed(from, to, delayMs, link, onForward) {
  const parked = [];
  const write = (chunk, receivedAt) => {
    to.write(chunk);
    onForward?.(chunk.length, receivedAt);
  };
  const forward = (chunk) => {
    const receivedAt = onForward ? performance.timeOrigin + performance.now() : 0;
    if (delayMs <= 0) write(chunk, receivedAt);
    else setTimeout(() => to.writable && write(chunk, receivedAt), delayMs);
  };
  from.on("data", (chunk) => {
    if (link.held) {
      parked.push(chunk);
      from.pause();
      return;
    }
    forward(chunk);
  });
  link.onRelease.add(() => {
    for (const chunk of parked.splice(0)) forward(chunk);
    from.resume();
  });
  from.on("end", () => {
    const finish = () => setTimeout(() => to.writable && to.end(), delayMs);
    if (link.held) link.onRelease.add(finish);
    else finish();
  });
}

export function startDelayProxy({ targetPort, targetHost = "127.0.0.1", delayMs, listenPort = 0, maxLifetimeMs = 30 * 60_000, onForward }) {
  if (targetHost !== "127.0.0.1") throw new Error("delay proxy only forwards to 127.0.0.1");
  const sockets = new Set();
  const link = { held: false, onRelease: new Set() };
  const track = (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  };
  const server = createServer({ allowHalfOpen: true, noDelay: true, pauseOnConnect: true }, (client) => {
    track(client);
    const open = () => {
      if (client.destroyed) return;
      const upstream = connect({ host: targetHost, port: targetPort, allowHalfOpen: true, noDelay: true });
      track(upstream);
      const report = (direction) =>
        onForward &&
        ((bytes, receivedAt) => onForward({ direction, bytes, receivedAt, sentAt: performance.timeOrigin + performance.now() }));
      pipeDelayed(client, upstream, delayMs, link, report("up"));
      pipeDelayed(upstream, client, delayMs, link, report("down"));
      client.resume();
      const kill = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("error", kill);
      upstream.on("error", kill);
      // A close crosses like any byte: not during an outage (a dead network delivers no FIN/RST).
      const later = (f) => () => {
        const go = () => setTimeout(f, delayMs + 1000).unref();
        if (link.held) link.onRelease.add(go);
        else go();
      };
      client.on(
        "close",
        later(() => upstream.destroy()),
      );
      upstream.on(
        "close",
        later(() => client.destroy()),
      );
    };
    client.on("error", () => client.destroy());
    // During a blackhole a new connection gets no answer: its handshake waits like a dropped SYN.
    if (link.held) link.onRelease.add(open);
    else open();
  });
  const lifetime = setTimeout(() => close(), maxLifetimeMs);
  lifetime.unref();
  function cutAll({ reset = false } = {}) {
    for (const s of sockets) {
      if (reset && typeof s.resetAndDestroy === "function") s.resetAndDestroy();
      else s.destroy();
    }
  }
  function blackhole() {
    link.held = true;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      link.held = false;
      const waiting = [...link.onRelease];
      link.onRelease.clear();
      for (const f of waiting) f();
    };
  }
  let refusing = false;
  function refuse() {
    const port = server.address().port;
    refusing = true;
    server.close();
    cutAll({ reset: true });
    return () => {
      if (!refusing) return;
      refusing = false;
      server.listen(port, "127.0.0.1");
    };
  }
  function close() {
    clearTimeout(lifetime);
    link.held = false;
    link.onRelease.clear();
    cutAll();
    if (refusing) return Promise.resolve();
    return new Promise((resolve) => server.close(() => resolve()));
  }
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(listenPort, "127.0.0.1", () => {
      resolve({
        port: server.address().port,
        cutAll,
        blackhole,
        refuse,
        close,
        get connections() {
          return sockets.size;
        },
      });
    });
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [targetPort, delayMs, maxSeconds = "600"] = process.argv.slice(2).map(Number);
  if (!targetPort || Number.isNaN(delayMs)) {
    process.stderr.write("usage: node bench/delay-proxy.mjs <targetPort> <oneWayDelayMs> [maxSeconds]\n");
    process.exit(2);
  }
  const logFile = process.env.DELAY_PROXY_LOG;
  let lines = [];
  const flush = () => {
    if (lines.length) appendFileSync(logFile, lines.join("\n") + "\n");
    lines = [];
  };
  if (logFile) setInterval(flush, 100).unref();
  const onForward = logFile ? (e) => lines.push(JSON.stringify(e)) : undefined;
  const proxy = await startDelayProxy({ targetPort, delayMs, maxLifetimeMs: maxSeconds * 1000, onForward });
  process.stdout.write(`${proxy.port}\n`);
  setTimeout(() => process.exit(0), maxSeconds * 1000).unref();
  process.on("SIGTERM", () => proxy.close().then(() => process.exit(0)));
  if (logFile) process.on("exit", flush);
}
