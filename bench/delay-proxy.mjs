// A TCP proxy that adds a fixed one-way delay in each direction, so the benchmark and the broker
// tests can put a realistic round-trip time (and, with cutAll(), a dropped link) between an SSH
// client and the local sshd. Only 127.0.0.1 targets; every run is bounded.
//
// As a module: `startDelayProxy({ targetPort, delayMs })` -> { port, cutAll(), close() }.
// As a program: `node bench/delay-proxy.mjs <targetPort> <delayMs> [maxSeconds]` prints the port.
import { createServer, connect } from "node:net";
import { fileURLToPath } from "node:url";

/**
 * Forwards bytes from `from` to `to` `delayMs` later. Timers of equal duration fire in insertion
 * order, so the byte order is kept without a queue of our own.
 */
function pipeDelayed(from, to, delayMs) {
  from.on("data", (chunk) => {
    if (delayMs <= 0) to.write(chunk);
    else setTimeout(() => to.writable && to.write(chunk), delayMs);
  });
  from.on("end", () => setTimeout(() => to.writable && to.end(), delayMs));
}

export function startDelayProxy({ targetPort, targetHost = "127.0.0.1", delayMs, listenPort = 0, maxLifetimeMs = 30 * 60_000 }) {
  if (targetHost !== "127.0.0.1") throw new Error("delay proxy only forwards to 127.0.0.1");
  const sockets = new Set();
  const track = (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  };
  const server = createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
    const upstream = connect({ host: targetHost, port: targetPort, allowHalfOpen: true, noDelay: true });
    track(client);
    track(upstream);
    pipeDelayed(client, upstream, delayMs);
    pipeDelayed(upstream, client, delayMs);
    const kill = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", kill);
    upstream.on("error", kill);
    client.on("close", () => setTimeout(() => upstream.destroy(), delayMs + 1000).unref());
    upstream.on("close", () => setTimeout(() => client.destroy(), delayMs + 1000).unref());
  });
  const lifetime = setTimeout(() => close(), maxLifetimeMs);
  lifetime.unref();
  function cutAll() {
    for (const s of sockets) s.destroy();
  }
  function close() {
    clearTimeout(lifetime);
    cutAll();
    return new Promise((resolve) => server.close(() => resolve()));
  }
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(listenPort, "127.0.0.1", () => {
      resolve({
        port: server.address().port,
        cutAll,
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
  const proxy = await startDelayProxy({ targetPort, delayMs, maxLifetimeMs: maxSeconds * 1000 });
  process.stdout.write(`${proxy.port}\n`);
  setTimeout(() => process.exit(0), maxSeconds * 1000).unref();
  process.on("SIGTERM", () => proxy.close().then(() => process.exit(0)));
}
