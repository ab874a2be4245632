// The per-host broker (bundled to dist/broker.js, run after entry.ts). Started detached by the first
// runtime process of a host configuration; its command line is just `node <V8 flags>
// dist/broker.js`: the configuration (options, the resolved hop chain, paths; no workspace id, no
// secret) arrives as one JSON document on stdin (../launch.ts). Diagnostics go to stderr, which the starter points
// at a 0600 log file next to the socket.
import { RuntimeError, oneLine } from "../../shared/errors.js";
import { parseLaunch, type BrokerLaunch } from "../launch.js";
import { brokerVersion } from "../paths.js";
import { BrokerServer } from "./broker-server.js";

const STDIN_TIMEOUT_MS = 5000;

function log(line: string): void {
  process.stderr.write(`${new Date().toISOString()} ${line}\n`);
}

function readLaunch(): Promise<BrokerLaunch> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => reject(new RuntimeError("input", "broker configuration did not arrive on stdin")), STDIN_TIMEOUT_MS);
    process.stdin.on("data", (d: Buffer) => chunks.push(d));
    process.stdin.once("end", () => {
      clearTimeout(timer);
      try {
        resolve(parseLaunch(Buffer.concat(chunks).toString("utf8")));
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  });
}

async function main(): Promise<void> {
  process.title = "paseo-ssh-broker";
  // Socket and log stay private to this user whatever umask we inherited.
  process.umask(0o077);
  const launch = await readLaunch();
  const version = brokerVersion(process.argv[1]);
  const server = await BrokerServer.start(
    {
      options: launch.options,
      ...(launch.plan ? { plan: launch.plan } : {}),
      ...(launch.proxyEnv ? { proxyEnv: launch.proxyEnv } : {}),
      paths: launch.paths,
      version,
      log,
    },
    () => {
      // Let the last log line and socket closes flush.
      setTimeout(() => process.exit(0), 50);
    },
  );
  if (!server) {
    log(`broker ${process.pid}: another broker already serves this configuration`);
    process.exit(0);
  }
  server.pool.warmUp();
  process.on("SIGTERM", () => void server.stop("SIGTERM"));
  process.on("SIGINT", () => void server.stop("SIGINT"));
}

process.on("uncaughtException", (err) => {
  log(`broker ${process.pid} crashed: ${oneLine(err.stack ?? err.message)}`);
  process.exit(1);
});
main().catch((err: Error) => {
  log(`broker ${process.pid} failed to start: ${oneLine(err.message)}`);
  process.exit(1);
});
