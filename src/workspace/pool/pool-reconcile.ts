// `reconcile` on a pool: every host (FANOUT at a time), including hosts that left the list but still hold a
// recorded workspace. A host that cannot be reached deletes nothing (nothing is asked of it) and is
// named on stderr; the others are reconciled all the same. Then the operation fails with a network
// error (exit code of the class) so Paseo logs "Workspace reconciliation failed" and the next daemon
// start reconciles again; Paseo goes on inspecting its records either way.
import type { Writable } from "node:stream";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import { acrossHosts, loadPool, onEntry } from "./pool.js";
import type { ReconcileRequest, ReconcileResult } from "../../shared/agent-api.js";
import type { RemoteHost } from "../../transport/host.js";
import { recordedEntry, type PoolEntry } from "./pool-options.js";
import { listPlacements, removePlacement } from "./pool-state.js";

/** Reconcile may sweep a large root: beyond the connect, its own bound. */
const RECONCILE_BOUND_MS = 10 * 60_000;

export async function reconcilePool(
  raw: Record<string, unknown>,
  owner: string,
  workspaceIds: string[],
  out: { stderr: Writable; verbose: boolean },
  /** Reconciles one host (the runtime brings each orphan's work back first: src/mirror/keep-work.ts). */
  reconcileOn: (host: RemoteHost, fields: ReconcileRequest, timeoutMs: number) => Promise<ReconcileResult>,
): Promise<void> {
  const pool = await loadPool(raw);
  const entries: PoolEntry[] = [...pool.entries];
  // Only this entry's records: another entry's hosts, and what it placed there, are its own business.
  const records = () => listPlacements(owner).filter((r) => r.scope === pool.scope);
  for (const record of records()) {
    if (entries.some((e) => e.id === record.hostId)) continue;
    const gone = recordedEntry(pool.defaults, record.entry, record.label);
    if (!entries.some((e) => e.id === gone.id)) entries.push(gone);
  }
  const answers = await acrossHosts(
    entries,
    (e, start) => onEntry(e, (host) => reconcileOn(host, { owner, workspaceIds, scope: pool.scope }, RECONCILE_BOUND_MS), start),
    (e) => e.options.connectTimeoutMs + RECONCILE_BOUND_MS,
  );
  const failed: string[] = [];
  for (const a of answers) {
    if (!a.ok) {
      failed.push(a.entry.label);
      out.stderr.write(`reconcile: ${a.entry.label} not reconciled, nothing deleted there: ${oneLine(a.error.message)}\n`);
      continue;
    }
    for (const r of a.value.removed) {
      removePlacement(owner, r.workspaceId);
      if (out.verbose)
        out.stderr.write(`reconcile: removed orphaned workspace ${JSON.stringify(r.workspaceId)} on ${a.entry.label} (${r.dir})\n`);
    }
  }
  // Records of workspaces Paseo no longer knows and no host holds any more.
  const known = new Set(workspaceIds);
  const reached = new Set(answers.filter((a) => a.ok).map((a) => a.entry.id));
  for (const record of records()) {
    if (!known.has(record.workspaceId) && reached.has(record.hostId)) removePlacement(owner, record.workspaceId);
  }
  if (failed.length > 0) {
    throw new RuntimeError("network", `reconcile incomplete: could not reach ${failed.join(", ")} (nothing deleted there)`);
  }
}
