// The per-host broker (bundled to dist/broker.js, run after entry.ts). Started detached by the first
// runtime process of a host configuration; its command line is just `node <V8 flags>
// dist/broker.js`: the configuration (options, the resolved hop chain, paths; no workspace id, no
// secret) arrives as one JSON document on stdin (its type: ../common/broker-launch.ts). Diagnostics go to
// stderr, which the starter points at a 0600 log file next to the socket.
import * as z from "../../contract/zod-mini.js";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import { parseRuntimeOptions } from "../../transport/options.js";
import type { ConnectionPlan } from "../../transport/ssh-config/resolve.js";
import type { BrokerLaunch } from "../common/broker-launch.js";
import { brokerVersion } from "../common/broker-paths.js";
import { BrokerServer } from "./broker-server.js";
import { HandOff, answerAsks, cliBeside } from "./hand-off.js";

const STDIN_TIMEOUT_MS = 5000;

const HopSchema = z.object({
  label: z.string(),
  host: z.string(),
  port: z.int(),
  user: z.string(),
  identityFiles: z.array(z.string()),
  identityFromOption: z.boolean(),
  identitiesOnly: z.boolean(),
  agentSocket: z.nullable(z.string()),
  userKnownHostsFiles: z.array(z.string()),
  globalKnownHostsFiles: z.array(z.string()),
  hostKeyAlias: z.optional(z.string()),
  acceptNew: z.enum(["off", "configured", "on"]),
  connectTimeoutMs: z.int(),
  keepaliveIntervalMs: z.int(),
  keepaliveCountMax: z.int(),
  proxyCommand: z.optional(z.string()),
  sources: z.optional(z.record(z.string(), z.array(z.string()))),
}) satisfies z.ZodMiniType<ConnectionPlan["hops"][number]>;

const LaunchSchema = z.strictObject({
  options: z.record(z.string(), z.unknown()),
  plan: z.optional(z.object({ hops: z.array(HopSchema).check(z.minLength(1)), via: z.enum(["ssh -G", "parser", "options"]) })),
  proxyEnv: z.optional(z.record(z.string(), z.string())),
  paths: z.strictObject({ dir: z.string(), socket: z.string(), lock: z.string(), log: z.string() }),
});

/**
 * The starter's JSON, checked like any other input: the options go through their own parser (their
 * `explicit` list, which that parser derives from the keys it was given, travels beside them).
 */
export function parseLaunch(text: string): BrokerLaunch {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new RuntimeError("input", "broker configuration on stdin is not JSON");
  }
  const launch = LaunchSchema.safeParse(value);
  if (!launch.success) throw new RuntimeError("input", "broker configuration on stdin is malformed");
  const { explicit, ...fields } = launch.data.options;
  const named = z.optional(z.array(z.string())).safeParse(explicit);
  if (!named.success) throw new RuntimeError("input", "broker configuration on stdin is malformed");
  const options = { ...parseRuntimeOptions(fields), explicit: named.data };
  const { plan, proxyEnv, paths } = launch.data;
  return { options, ...(plan ? { plan } : {}), ...(proxyEnv ? { proxyEnv } : {}), paths };
}

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
  // Before the first channel: its notices stream declares the asks answered.
  // The live mirror: a workspace whose refs moved is brought back by the runtime's `work-notice`
  // operation, connecting back through this broker (hand-off.ts).
  const script = process.argv[1]!;
  const handOff = {
    cli: cliBeside(script),
    input: { options: launch.options, target: { paths: launch.paths, version, script, ...(launch.plan ? { plan: launch.plan } : {}) } },
    log,
  };
  new HandOff(server.pool.notices, "work", "work-notice", handOff);
  // git in a workspace asks for a credential: the runtime's `git-credential` operation decides and
  // answers (it bounds git credential to 30 s; this reaps a stuck run).
  if (launch.options.forwardGitCredentials) answerAsks(server.pool.notices, "git-credential", "git-credential", handOff, 34_000);
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
