// The host a pool's workspace lives on, for every operation after create: its placement record
// (no round trip, and no more code loaded than the options' parsing); only with the record lost
// does the pool module load and ask the hosts (pool.ts findWorkspace). The record names the host
// entry; its options are the runtime entry's as they are now, so a changed identityFile or
// knownHostsFile reaches existing workspaces and a key dropped from the schema breaks nothing.
import { readPlacement, type PlacementRecord } from "./pool-state.js";
import { parseEntry, parsePoolSpec, recordedEntry, type Located, type PoolEntry } from "./pool-options.js";

export async function locateWorkspace(raw: Record<string, unknown>, owner: string, workspaceId: string): Promise<Located> {
  const record = readPlacement(owner, workspaceId);
  if (record) {
    const { options, label } = recordedHost(raw, record);
    return { options, label };
  }
  return (await import("./pool.js")).findWorkspace(raw, owner, workspaceId);
}

/**
 * The entry a record names: the `hosts` entry of that identity as the options say now, else (a
 * `hostsCommand` pool, or a host that left the list) the recorded entry under today's defaults.
 */
export function recordedHost(raw: Record<string, unknown>, record: PlacementRecord): PoolEntry {
  const spec = parsePoolSpec(raw);
  for (const [index, entry] of (spec.hosts ?? []).entries()) {
    let parsed: PoolEntry;
    try {
      parsed = parseEntry(spec.defaults, entry, index, "hosts");
    } catch {
      continue; // another entry's mistake is for the operations that use it to report
    }
    if (parsed.id === record.hostId) return parsed;
  }
  return recordedEntry(spec.defaults, record.entry, record.label);
}
