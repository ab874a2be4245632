// The host daemon's start-up sweep: an exec recorded as starting or running whose supervising
// agent (recorded pid + start time) is gone has nobody left to report or reap it: a daemon that
// crashed or was killed, or a host that rebooted. It is recorded abandoned and its tree reaped, so
// a new daemon never inherits half-alive work. Execs of a live supervisor (another build's daemon)
// are left alone.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { oneLine } from "../../shared/errors.js";
import { isGone } from "../../shared/proc-stat.js";
import { readRecordFile, updateExecRecord, type ExecRecord } from "../exec/records.js";
import { WORKSPACE_PREFIX, rootLayout, workspaceLayoutOfKey, type WorkspaceLayout } from "../layout.js";
import { execMembers, killMembers } from "../proc/process-set.js";

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function orphaned(rec: ExecRecord): boolean {
  return (rec.state === "starting" || rec.state === "running") && isGone(rec.agentPid, rec.agentStartTime ?? undefined);
}

async function reap(layout: WorkspaceLayout, rec: ExecRecord): Promise<void> {
  const abandoned = updateExecRecord(layout, rec, { state: "abandoned", reaped: false });
  await killMembers(() => execMembers(layout, rec.execId, rec.pgid), `exec ${rec.execId}`);
  updateExecRecord(layout, abandoned, { reaped: true });
}

/** Returns how many orphaned execs were reaped; failures are logged, never thrown. */
export async function sweepOrphanedExecs(root: string, log: (line: string) => void): Promise<number> {
  const base = rootLayout(root).workspacesBase;
  const work: Array<Promise<void>> = [];
  for (const name of list(base).filter((n) => n.startsWith(WORKSPACE_PREFIX))) {
    const layout = workspaceLayoutOfKey(root, name.slice(WORKSPACE_PREFIX.length));
    for (const file of list(layout.execs).filter((f) => f.endsWith(".json") && !f.startsWith("."))) {
      const rec = readRecordFile(join(layout.execs, file));
      if (!rec || !orphaned(rec)) continue;
      log(`reaping exec ${rec.execId} of ${name}: its supervising agent ${rec.agentPid} is gone`);
      work.push(reap(layout, rec).catch((err: Error) => log(`reaping exec ${rec.execId} failed: ${oneLine(err.message)}`)));
    }
  }
  await Promise.all(work);
  return work.length;
}
