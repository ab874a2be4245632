// Agent side of `reconcile`: removes this runtime instance's orphaned workspaces and prunes what no
// workspace uses any more (project caches, half-deleted directories, abandoned staging checkouts).
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { basename, join } from "node:path";
import type { AgentContext } from "../context.js";
import { ReconcileRequest, type ArchivedWork, type ReconcileResult } from "../../shared/agent-api.js";
import { WORKSPACE_PREFIX, rootLayout, workspaceLayout } from "../layout.js";
import type { WorkspaceManifest } from "./manifest.js";
import { loadWorkspace, parseManifest } from "./store.js";
import { createInProgress } from "./claim.js";
import { cachePath, pruneLockPath } from "./git-cache.js";
import { TRASH_PREFIX, olderThan, pruneTmp, removeTree } from "./trash.js";
import { tryLock } from "./holder-lock.js";
import { parseRequest, removeOwned } from "./workspace-op-helpers.js";
import { STAGING_PREFIX } from "./create-on-host.js";
import { INCOMING_PREFIX } from "./pack-intake.js";
import { sweepSpares } from "./spare-checkout.js";
import { requireMarkedRoot } from "../root-marker.js";
import { archivedProjectKeys, pruneArchives } from "./work-archive.js";

/** A staging checkout this old belongs to an agent that died (a live clone never takes hours). */
const STAGING_MAX_AGE_MS = 6 * 3600_000;
/** Caches younger than this are never pruned: a create may be filling one right now. */
const CACHE_PRUNE_MIN_AGE_MS = 10 * 60_000;

interface DirRecord {
  /** Valid manifest for the directory's own derived name, or null. */
  manifest: WorkspaceManifest | null;
  /** Cache the directory refers to, read even from manifests we do not accept. */
  projectKey: string | null;
}

function readDirRecord(dir: string): DirRecord {
  try {
    const text = readFileSync(join(dir, "manifest.json"), "utf8");
    const raw = JSON.parse(text) as { workspaceId?: unknown; projectKey?: unknown };
    const projectKey = typeof raw.projectKey === "string" ? raw.projectKey : null;
    const manifest = typeof raw.workspaceId === "string" ? parseManifest(text, raw.workspaceId, basename(dir)) : null;
    return { manifest, projectKey };
  } catch {
    return { manifest: null, projectKey: null };
  }
}

/**
 * Removes orphans: directories whose name is the derived name of their manifest's id, owned by
 * this runtime instance and created by the runtime entry reconciling (its scope), with an id Paseo
 * no longer knows. Everything else is left alone. Then
 * prunes caches no workspace references and stale trash.
 */
export async function reconcile(ctx: AgentContext): Promise<ReconcileResult> {
  const { owner, workspaceIds, scope = null, list = false, mirrored = {} } = parseRequest(ReconcileRequest, ctx.request);
  const keep = new Set(workspaceIds);
  requireMarkedRoot(ctx.root, "reconcile");
  const l = rootLayout(ctx.root);
  const removed: ReconcileResult["removed"] = [];
  const orphans: string[] = [];
  const usedKeys = archivedProjectKeys(ctx.root);
  const entries = existsSync(l.workspacesBase) ? readdirSync(l.workspacesBase) : [];
  for (const name of entries.filter((n) => n.startsWith(WORKSPACE_PREFIX))) {
    const { manifest: m, projectKey } = readDirRecord(join(l.workspacesBase, name));
    // Another runtime entry's workspace (another pool, or a single host sharing this root) is not ours to judge.
    const ours = m !== null && m.owner === owner && (m.scope ?? null) === scope;
    if (m && ours && !keep.has(m.workspaceId)) {
      if (list) {
        orphans.push(m.workspaceId);
        continue;
      }
      const gone = await removeOrphan(ctx.root, owner, m, Object.hasOwn(mirrored, m.workspaceId) ? mirrored[m.workspaceId] : null);
      if (gone) {
        removed.push({ workspaceId: m.workspaceId, dir: workspaceLayout(ctx.root, m.workspaceId).dir, archived: gone.archived });
        continue;
      }
    }
    // Every directory that stays, ours or not, keeps the cache its checkout borrows objects from.
    if (projectKey) usedKeys.add(projectKey);
  }
  if (list) return { removed, orphans };
  await pruneArchives(ctx.root);
  await pruneCaches(ctx.root, usedKeys);
  await pruneTrash(ctx.root);
  return { removed };
}

/** Removes one orphan after re-verifying it; null when it must stay (changed, or being created). */
async function removeOrphan(
  root: string,
  owner: string,
  m: WorkspaceManifest,
  mirrored: string | null | undefined,
): Promise<{ archived: ArchivedWork | null } | null> {
  const layout = workspaceLayout(root, m.workspaceId);
  let loaded: ReturnType<typeof loadWorkspace>;
  try {
    loaded = loadWorkspace(root, m.workspaceId, owner);
  } catch {
    return null; // its ownership changed since we read it: never touch it
  }
  // A create running right now is not an orphan yet: Paseo persists the record after create.
  if (loaded.state !== "present" || createInProgress(layout)) return null;
  return { archived: await removeOwned(root, layout, loaded.manifest, mirrored) };
}

/** Project keys the workspace directories name right now (read afresh from every manifest). */
function referencedKeys(root: string): Set<string> {
  const base = rootLayout(root).workspacesBase;
  const names = existsSync(base) ? readdirSync(base).filter((n) => n.startsWith(WORKSPACE_PREFIX)) : [];
  const keys = archivedProjectKeys(root);
  for (const n of names) {
    const k = readDirRecord(join(base, n)).projectKey;
    if (k !== null) keys.add(k);
  }
  return keys;
}

/**
 * Deletes caches no workspace uses. `used` was gathered before the orphans were removed, so under
 * the cache's prune lock the manifests are read again: a create that started meanwhile has named
 * its cache there before it touches it, and its cache stays.
 */
async function pruneCaches(root: string, used: Set<string>): Promise<void> {
  const l = rootLayout(root);
  if (!existsSync(l.cacheBase)) return;
  for (const name of readdirSync(l.cacheBase)) {
    const key = name.replace(/\.git$/, "");
    if (!name.endsWith(".git")) continue;
    if (used.has(key) || !olderThan(cachePath(root, key), CACHE_PRUNE_MIN_AGE_MS)) {
      sweepSpares(cachePath(root, key));
      continue;
    }
    const release = tryLock(pruneLockPath(root, key));
    if (!release) continue; // another reconcile is on it
    const trash = join(l.tmpBase, `${TRASH_PREFIX}cache-${key}-${randomBytes(4).toString("hex")}`);
    let moved = false;
    try {
      if (referencedKeys(root).has(key)) continue;
      mkdirSync(l.tmpBase, { recursive: true, mode: 0o700 });
      renameSync(cachePath(root, key), trash);
      moved = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    } finally {
      release();
    }
    if (moved) await removeTree(trash);
  }
}

/** Removes leftovers of killed agents: half-deleted workspaces and caches, abandoned staging checkouts and pack quarantines. */
function pruneTrash(root: string): Promise<void> {
  return pruneTmp(
    root,
    (name, path) => (name.startsWith(STAGING_PREFIX) || name.startsWith(INCOMING_PREFIX)) && olderThan(path, STAGING_MAX_AGE_MS),
  );
}
