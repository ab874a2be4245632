// Agent side of `reconcile`: removes this runtime instance's orphaned workspaces and prunes what no
// workspace uses any more (project caches, half-deleted directories, abandoned staging checkouts).
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { basename, join } from "node:path";
import { RuntimeError } from "../errors.js";
import type { AgentContext } from "./context.js";
import type { ReconcileResult } from "../workspace/agent-protocol.js";
import { WORKSPACE_PREFIX, rootLayout, workspaceLayout } from "./layout.js";
import type { WorkspaceManifest } from "./manifest.js";
import { loadWorkspace, parseManifest } from "./workspace-store.js";
import { createInProgress } from "./workspace-claim.js";
import { cachePath, olderThan } from "./git-cache.js";
import { removeOwned, str } from "./workspace-common.js";
import { STAGING_PREFIX } from "./workspace-create.js";

/** A staging checkout this old belongs to an agent that died (a live clone never takes hours). */
const STAGING_MAX_AGE_MS = 6 * 3600_000;
/** Caches younger than this are never pruned: a create may be filling one right now. */
const CACHE_PRUNE_MIN_AGE_MS = 10 * 60_000;

function readOwnManifest(dir: string): WorkspaceManifest | null {
  try {
    const text = readFileSync(join(dir, "manifest.json"), "utf8");
    const id = (JSON.parse(text) as { workspaceId?: unknown }).workspaceId;
    return typeof id === "string" ? parseManifest(text, id, basename(dir)) : null;
  } catch {
    return null;
  }
}

/**
 * Removes orphans: directories whose name is the derived name of their manifest's id, owned by
 * this runtime instance, with an id Paseo no longer knows. Everything else is left alone. Then
 * prunes caches no workspace references and stale trash.
 */
export async function reconcile(ctx: AgentContext): Promise<ReconcileResult> {
  const owner = str(ctx.request, "owner");
  const keepRaw = ctx.request.workspaceIds;
  if (!Array.isArray(keepRaw) || !keepRaw.every((x) => typeof x === "string")) throw new RuntimeError("input", "reconcile requires workspaceIds");
  const keep = new Set(keepRaw as string[]);
  const l = rootLayout(ctx.root);
  const removed: ReconcileResult["removed"] = [];
  const usedKeys = new Set<string>();
  const entries = existsSync(l.workspacesBase) ? readdirSync(l.workspacesBase) : [];
  for (const name of entries.filter((n) => n.startsWith(WORKSPACE_PREFIX))) {
    const m = readOwnManifest(join(l.workspacesBase, name));
    if (!m) continue;
    if (m.owner !== owner || keep.has(m.workspaceId)) {
      if (m.projectKey) usedKeys.add(m.projectKey);
      continue;
    }
    const layout = workspaceLayout(ctx.root, m.workspaceId);
    // Re-verify through the store right before removal (ownership may have changed meanwhile).
    const loaded = loadWorkspace(ctx.root, m.workspaceId, owner);
    // A create running right now is not an orphan yet: Paseo persists the record after create.
    if (loaded.state !== "present" || createInProgress(layout)) continue;
    await removeOwned(ctx.root, layout, loaded.manifest);
    removed.push({ workspaceId: m.workspaceId, dir: layout.dir });
  }
  pruneCaches(ctx.root, usedKeys);
  pruneTrash(ctx.root);
  return { removed };
}

function pruneCaches(root: string, used: Set<string>): void {
  const base = rootLayout(root).cacheBase;
  if (!existsSync(base)) return;
  for (const name of readdirSync(base)) {
    const key = name.replace(/\.git$/, "");
    if (!name.endsWith(".git") || used.has(key) || !olderThan(cachePath(root, key), CACHE_PRUNE_MIN_AGE_MS)) continue;
    rmSync(cachePath(root, key), { recursive: true, force: true });
  }
}

/** Removes leftovers of killed agents: half-deleted workspaces and abandoned staging checkouts. */
function pruneTrash(root: string): void {
  const base = rootLayout(root).tmpBase;
  if (!existsSync(base)) return;
  for (const name of readdirSync(base)) {
    const stale = (name.startsWith("trash-") && olderThan(join(base, name), 60_000)) || (name.startsWith(STAGING_PREFIX) && olderThan(join(base, name), STAGING_MAX_AGE_MS));
    if (stale) rmSync(join(base, name), { recursive: true, force: true });
  }
}
