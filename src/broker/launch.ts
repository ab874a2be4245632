// The launch document: what the starter (client.ts) writes to a new broker's stdin and the broker
// process (process/run-broker.ts) reads: options, the resolved hop chain, paths; no workspace id.
// The only environment in it is a ProxyCommand's, which the broker hands to that command alone.
// Here, beside neither side, so the two import only this of each other.
import * as z from "../contract/zod-mini.js";
import { RuntimeError } from "../shared/errors.js";
import { parseRuntimeOptions, type RuntimeOptions } from "../transport/options.js";
import type { ConnectionPlan } from "../transport/ssh-config/resolve.js";
import type { BrokerPaths } from "./paths.js";

export interface BrokerLaunch {
  options: RuntimeOptions;
  plan?: ConnectionPlan;
  /** Only when the plan has a ProxyCommand: the environment it runs in (never the broker's own). */
  proxyEnv?: NodeJS.ProcessEnv;
  paths: BrokerPaths;
}

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
