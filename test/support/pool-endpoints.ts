// Several SSH endpoints on 127.0.0.1 for pool tests: one extra sshd behind a TCP relay per endpoint,
// each with its own port, known_hosts file and remote root. `refuse()` closes the relay's port
// (connections refused) and cuts what it carried; `blackhole()` cuts what it carried and leaves new
// connections unanswered (a host gone from the network); `stall()` leaves the connections it carries
// open but carries nothing more either way, and leaves new ones unanswered (a host that lost power:
// no reset reaches anyone); `restore()` ends any of them.
import { createServer, connect, type Server, type Socket } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rig } from "../rig/rig.js";
import { startExtraSshd, type ExtraSshd } from "./extra-sshd.js";
import { removeRoot, suiteRoot } from "./workspace.js";
import { lifecycleRequest, runCli } from "./run-cli.js";
import type { Options } from "../../src/contract/index.js";

export interface PoolOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The last stderr line (the error message of a failure). */
  message: string;
}

/** One CLI operation on a pool's options (progress lines on, unless `env` says otherwise). */
export async function poolOp(
  options: Options,
  args: string[],
  extra: Record<string, unknown> = {},
  env: NodeJS.ProcessEnv = { ...process.env, PASEO_SSH_PROGRESS: "1" },
): Promise<PoolOutcome> {
  const r = await runCli(args, { stdin: lifecycleRequest(options, extra), env, timeoutMs: 180_000 });
  const lines = r.stderr.trim().split("\n");
  return { code: r.code, stdout: r.stdout.toString("utf8"), stderr: r.stderr, message: lines[lines.length - 1] ?? "" };
}

export interface PoolEndpoint {
  port: number;
  root: string;
  /** One `hosts` entry reaching this endpoint. */
  entry(extra?: Record<string, unknown>): Record<string, unknown>;
  refuse(): Promise<void>;
  blackhole(): void;
  stall(): void;
  restore(): Promise<void>;
  stop(): Promise<void>;
  /** The most connections carried at once since the last call (then reset). */
  takePeak(): number;
  /** Connections carried now. */
  carried(): number;
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve((server.address() as { port: number }).port);
    });
  });
}

export async function startPoolEndpoint(label: string): Promise<PoolEndpoint> {
  const sshd: ExtraSshd = await startExtraSshd([]);
  const sockets = new Set<Socket>();
  /** Each carried connection: the client's side and sshd's. */
  const pairs = new Set<[Socket, Socket]>();
  /** Connections accepted during a blackhole: never answered, closed when it ends. */
  let unanswered: Set<Socket> | null = null;
  let peak = 0;
  const makeServer = () =>
    createServer((client) => {
      if (unanswered) {
        unanswered.add(client);
        client.on("error", () => client.destroy());
        return;
      }
      const upstream = connect(sshd.port, "127.0.0.1");
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
        s.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      const pair: [Socket, Socket] = [client, upstream];
      pairs.add(pair);
      peak = Math.max(peak, pairs.size);
      client.on("close", () => pairs.delete(pair));
      client.pipe(upstream).pipe(client);
    });
  let server = makeServer();
  const port = await listen(server, 0);
  const dir = mkdtempSync(join(rig().tmpDir, `pool-${label}-`));
  const knownHostsFile = join(dir, "known_hosts");
  writeFileSync(
    knownHostsFile,
    rig()
      .hostPublicKeys.map((k) => `[127.0.0.1]:${port} ${k.split(" ").slice(0, 2).join(" ")}\n`)
      .join(""),
  );
  const root = suiteRoot(`pool-${label}`);
  const closeServer = () =>
    new Promise<void>((resolve) => {
      for (const s of [...sockets, ...(unanswered ?? [])]) s.destroy();
      server.close(() => resolve());
    });
  return {
    port,
    root,
    // connectTimeoutMs is left to the pool's defaults.
    entry: (extra = {}) => {
      const { connectTimeoutMs: _, ...own } = sshd.options();
      return { ...own, port, knownHostsFile, root, ...extra };
    },
    refuse: closeServer,
    blackhole() {
      unanswered = new Set();
      for (const s of sockets) s.destroy();
    },
    stall() {
      unanswered = new Set();
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        // Read and drop: nothing crosses, and no window fills to tell either side.
        client.on("data", () => undefined);
        upstream.on("data", () => undefined);
      }
    },
    async restore() {
      if (unanswered) {
        for (const s of unanswered) s.destroy();
        unanswered = null;
        // A stalled connection stays dead, as after a power cut: the next reset ends it.
        for (const s of sockets) s.destroy();
        return;
      }
      server = makeServer();
      await listen(server, port);
    },
    takePeak() {
      const seen = peak;
      peak = pairs.size;
      return seen;
    },
    carried: () => pairs.size,
    async stop() {
      await closeServer();
      await sshd.stop();
      rmSync(dir, { recursive: true, force: true });
      removeRoot(root);
    },
  };
}
