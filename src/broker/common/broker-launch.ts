// The launch document: what the starter (client/connect-broker.ts) writes to a new broker's stdin and the broker
// process (process/run-broker.ts, which checks it) reads. Here, beside neither side, so the two
// import only this of each other.
import type { RuntimeOptions } from "../../transport/options.js";
import type { ConnectionPlan } from "../../transport/ssh-config/resolve.js";
import type { BrokerPaths } from "./broker-paths.js";

export interface BrokerLaunch {
  options: RuntimeOptions;
  plan?: ConnectionPlan;
  /** Only when the plan has a ProxyCommand: the environment it runs in (never the broker's own). */
  proxyEnv?: NodeJS.ProcessEnv;
  paths: BrokerPaths;
}
