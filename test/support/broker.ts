// Test helpers for the per-host broker: options for a broker of one's own (unique root, short idle
// time), asking a broker for its stats, and stopping it so no test leaves one running.
import { parseRuntimeOptions, type RuntimeOptions } from "../../src/transport/options.js";
import { brokerTarget, type BrokerTarget } from "../../src/broker/client/connect-broker.js";
import { dial } from "../../src/broker/common/dial.js";
import { resolvePlan } from "../../src/transport/ssh-config/resolve.js";
import { BrokerResultSchema, readLine, writeLine, type BrokerResult, type BrokerStats } from "../../src/broker/common/wire.js";
import { rigOptions, uniqueTestRoot } from "../rig/rig.js";
import { isGone } from "../../src/shared/proc-stat.js";

export function brokerOptions(extra: Record<string, unknown> = {}): RuntimeOptions {
  return parseRuntimeOptions(rigOptions({ root: uniqueTestRoot("broker"), brokerIdleMs: 3000, ...extra }));
}

/** The broker a runtime process would use: keyed by the resolved hop chain, as openHost keys it. */
export async function targetOf(options: RuntimeOptions): Promise<BrokerTarget> {
  const t = brokerTarget(options, await resolvePlan(options));
  if (!t) throw new Error("no usable broker directory");
  return t;
}

async function ask(
  options: RuntimeOptions,
  kind: "ping" | "shutdown" | "notices",
  extra: Record<string, unknown> = {},
): Promise<BrokerResult | null> {
  const t = await targetOf(options);
  const r = await dial(t.paths.socket, t.version);
  if (r.state !== "ok") return null;
  writeLine(r.sock, { kind, ...extra });
  try {
    return await readLine(r.sock, BrokerResultSchema, 5000, "answer");
  } finally {
    r.sock.destroy();
  }
}

/** The live broker's stats, or null when none answers. */
export async function brokerStats(options: RuntimeOptions): Promise<BrokerStats | null> {
  const res = await ask(options, "ping");
  return res && res.ok && res.stats ? res.stats : null;
}

/** What the live broker holds of the host's notices of `kind` (`key` only, when given); null when no broker answers. */
export async function brokerNotices(options: RuntimeOptions, kind: string, key?: string): Promise<Array<Record<string, unknown>> | null> {
  const res = await ask(options, "notices", { of: kind, ...(key !== undefined ? { key } : {}) });
  return res && res.ok ? (res.notices ?? []) : null;
}

/** `retireDaemon`: the host daemon is asked to exit as soon as nothing runs on it. */
export async function stopBroker(options: RuntimeOptions, opts: { retireDaemon?: boolean } = {}): Promise<void> {
  await ask(options, "shutdown", opts.retireDaemon ? { retireDaemon: true } : {});
}

/** The process runs (not gone, not a zombie). */
export function alive(pid: number): boolean {
  return !isGone(pid);
}
