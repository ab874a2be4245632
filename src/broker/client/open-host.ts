// The one way CLI operations obtain a RemoteHost (and withHost, which always closes it): through the per-host broker by default (one SSH
// connection shared by every runtime process), or in-process when the "broker" option is false,
// PASEO_SSH_NO_BROKER=1 is set (debugging), or no private broker directory can be had; and for a
// look-up across a large pool, on a host whose broker is not running.
import { existsSync } from "node:fs";
import type { RuntimeOptions } from "../../transport/options.js";
import { brokerTarget } from "./connect-broker.js";
import { brokerDir } from "../common/broker-paths.js";
import { BrokerHost, type HostOpening } from "./broker-host.js";
import type { RemoteHost } from "../../transport/host.js";
import { resolvePlan, type ConnectionPlan } from "../../transport/ssh-config/resolve.js";

// ssh2 and the rest of the in-process transport load only when used: a brokered operation's
// process never needs them, and loading them costs tens of milliseconds of every start.
async function openSshHost(options: RuntimeOptions, plan: ConnectionPlan): Promise<RemoteHost> {
  return (await import("../../transport/ssh-host.js")).connectSshHost(options, undefined, plan);
}

export function brokerEnabled(options: RuntimeOptions): boolean {
  return options.broker && process.env.PASEO_SSH_NO_BROKER !== "1";
}

/**
 * `first`: what the operation's first agent conversation will be (written with the connect to the
 * broker), and whether it fails fast on a host whose link is down (in-process, a connect is one
 * attempt bounded by connectTimeoutMs anyway).
 */
export async function openHost(options: RuntimeOptions, first: HostOpening = {}, startBroker = true): Promise<RemoteHost> {
  // The hop chain is resolved here (ssh_config) so the broker is keyed by where it really connects.
  // ssh -G answers are kept in the private broker directory (a spawn saved per operation).
  const plan = await resolvePlan(options, { cacheDir: brokerDir() });
  if (!brokerEnabled(options)) return openSshHost(options, plan);
  const target = brokerTarget(options, plan);
  if (!target) return openSshHost(options, plan);
  // A look-up across a large pool: a host without a broker is asked in-process, so a fan-out over
  // hundreds of hosts does not leave hundreds of brokers alive.
  if (!startBroker && !existsSync(target.paths.socket)) return openSshHost(options, plan);
  return new BrokerHost(options, target, first).connect();
}

/** Opens the host for one operation, runs `fn`, and always closes it. */
export async function withHost<T>(
  options: RuntimeOptions,
  fn: (host: RemoteHost) => Promise<T>,
  first: HostOpening = {},
  startBroker = true,
): Promise<T> {
  const host = await openHost(options, first, startBroker);
  try {
    return await fn(host);
  } finally {
    host.close();
  }
}
