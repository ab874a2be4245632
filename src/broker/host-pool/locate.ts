// The host a pool's workspace lives on, for every operation after create: its placement record
// (no round trip, and no more code loaded than this); only with the record lost does the pool
// module load and ask the hosts (pool.ts findWorkspace).
import { parseRuntimeOptions } from "../../transport/options.js";
import { readPlacement } from "./state.js";
import type { Located } from "./options.js";

export async function locateWorkspace(raw: Record<string, unknown>, owner: string, workspaceId: string): Promise<Located> {
  const record = readPlacement(owner, workspaceId);
  if (record) return { options: parseRuntimeOptions(record.raw), label: record.label };
  return (await import("./pool.js")).findWorkspace(raw, owner, workspaceId);
}
