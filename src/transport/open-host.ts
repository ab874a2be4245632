// The one way CLI operations obtain a RemoteHost: through the per-host broker by default (one SSH
// connection shared by every runtime process), or in-process when the "broker" option is false,
// PASEO_SSH_NO_BROKER=1 is set (debugging), or no private broker directory can be had.
import type { RuntimeOptions } from "../options.js";
import { brokerTarget } from "../broker/client.js";
import { BrokerHost } from "./broker-host.js";
import type { RemoteHost } from "./host.js";
import { openHost as openSshHost } from "./ssh-host.js";

export function brokerEnabled(options: RuntimeOptions): boolean {
  return options.broker !== false && process.env.PASEO_SSH_NO_BROKER !== "1";
}

export async function openHost(options: RuntimeOptions): Promise<RemoteHost> {
  if (!brokerEnabled(options)) return openSshHost(options);
  const target = brokerTarget(options);
  if (!target) return openSshHost(options);
  return new BrokerHost(options, target).connect();
}
