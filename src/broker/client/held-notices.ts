// What a broker that already runs holds of its host's notices (the forwards of kind "ports"), for
// `status`: asked without starting a broker, since where none runs nothing is held (the forwards
// live in the broker), and a fan-out over a pool must not leave brokers behind.
import { resolvePlan } from "../../transport/ssh-config/resolve.js";
import type { RuntimeOptions } from "../../transport/options.js";
import { brokerEnabled } from "./open-host.js";
import { brokerDir } from "../common/broker-paths.js";
import { brokerTarget } from "./connect-broker.js";
import { dial } from "../common/dial.js";
import { BrokerResultSchema, readLine, writeLine } from "../common/wire.js";
import { fromWireError } from "../../shared/errors.js";

/** The notices of `kind` the running broker of `options` holds, every key; [] when no broker runs. */
export async function heldNotices(options: RuntimeOptions, kind: string, timeoutMs: number): Promise<Array<Record<string, unknown>>> {
  if (!brokerEnabled(options)) return [];
  const target = brokerTarget(options, await resolvePlan(options, { cacheDir: brokerDir() }));
  if (!target) return [];
  const r = await dial(target.paths.socket, target.version);
  if (r.state !== "ok") return [];
  try {
    writeLine(r.sock, { kind: "notices", of: kind });
    const result = await readLine(r.sock, BrokerResultSchema, timeoutMs, "answer");
    if (!result.ok) throw fromWireError(result);
    return result.notices ?? [];
  } finally {
    r.sock.destroy();
  }
}
