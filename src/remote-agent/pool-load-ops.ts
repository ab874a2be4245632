// `pool.load`: the live facts a pool's placement scores this host on (placementScore, src/workspace/pool/pool.ts),
// read in one round trip from the host daemon, which is the only place that knows its live execs.
// Every Paseo host sharing the pool sees the same facts, so nothing central keeps the load.
import { existsSync, readdirSync, readFileSync, statfsSync } from "node:fs";
import { availableParallelism, freemem, loadavg } from "node:os";
import type { OneShotHandlers } from "./context.js";
import { rootLayout, workspaceLayout, WORKSPACE_PREFIX } from "./layout.js";
import { loadWorkspace } from "./workspace/store.js";
import { cachePath } from "./workspace/git-cache.js";
import { execSupervisors } from "./exec/sessions.js";
import { PoolLoadRequest } from "../shared/agent-api.js";
import { parseRequest } from "./workspace/workspace-op-helpers.js";

/** MemAvailable (what can be had without swapping) where /proc says it; free memory otherwise. */
function memAvailable(): number {
  try {
    const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"));
    if (m) return Number(m[1]) * 1024;
  } catch {
    // Not Linux: os.freemem is the best there is.
  }
  return freemem();
}

function disk(root: string): { freeBytes: number | null; blockSize: number } {
  try {
    const s = statfsSync(root);
    return { freeBytes: Number(s.bavail) * Number(s.bsize), blockSize: Number(s.bsize) };
  } catch {
    return { freeBytes: null, blockSize: 4096 };
  }
}

/** Whether this owner's workspace is here (anything unreadable or foreign: not ours to go back to). */
function holds(root: string, workspaceId: string, owner: string): boolean {
  try {
    return loadWorkspace(root, workspaceId, owner).state === "present";
  } catch {
    return false;
  }
}

export const loadOps: Pick<OneShotHandlers, "pool.load"> = {
  "pool.load": async (ctx) => {
    const { projectKey, holds: wanted, inflight } = parseRequest(PoolLoadRequest, ctx.request);
    const base = rootLayout(ctx.root).workspacesBase;
    const workspaces = existsSync(base) ? readdirSync(base).filter((n) => n.startsWith(WORKSPACE_PREFIX)).length : 0;
    const cpus = availableParallelism();
    return {
      ...disk(existsSync(ctx.root) ? ctx.root : "/"),
      memAvailableBytes: memAvailable(),
      loadPerCpu: loadavg()[0]! / cpus,
      cpus,
      liveExecs: execSupervisors.size,
      workspaces,
      warmCache: projectKey !== null && existsSync(cachePath(ctx.root, projectKey)),
      ...(wanted ? { holds: holds(ctx.root, wanted.workspaceId, wanted.owner) } : {}),
      ...(inflight ? { claimed: inflight.filter((id) => existsSync(workspaceLayout(ctx.root, id).dir)) } : {}),
    };
  },
};
