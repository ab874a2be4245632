// Claiming, re-verifying and removing workspace directories. The claim is an atomic mkdir of the
// final path plus an exclusive manifest write; every later step re-reads the manifest, so a
// directory or manifest that someone else put in place is detected and never touched (M1, N1).
import { mkdirSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { RuntimeError } from "../../shared/errors.js";
import { rootLayout, type WorkspaceLayout } from "../layout.js";
import { MANIFEST_MARKER, type WorkspaceManifest } from "./manifest.js";
import { createManifestExclusive, loadWorkspace, ownershipMismatch } from "./store.js";
import { heldByOther, tryLock } from "./holder-lock.js";
import { discardTree } from "./trash.js";

/** Creates the root's private directories (0700) up to, but not including, workspace dirs. */
export function ensureRootDirs(root: string): void {
  const l = rootLayout(root);
  for (const d of [l.root, l.workspacesBase, l.cacheBase, l.tmpBase]) mkdirSync(d, { recursive: true, mode: 0o700 });
}

export function newManifest(workspaceId: string, owner: string, projectKey: string | null, scope: string | null = null): WorkspaceManifest {
  const now = new Date().toISOString();
  return {
    ...(scope === null ? {} : { scope }),
    marker: MANIFEST_MARKER,
    workspaceId,
    owner,
    phase: "materializing",
    branch: "",
    commit: "",
    workspaceRoot: "",
    projectKey,
    lifecycleEnvironment: {},
    createdAt: now,
    updatedAt: now,
  };
}

/**
 * Claims `<dir>` for this owner: mkdir (not recursive) fails if anything is already there, in
 * which case the existing directory's own ownership verdict is thrown.
 */
export function claimWorkspace(root: string, layout: WorkspaceLayout, manifest: WorkspaceManifest): void {
  ensureRootDirs(root);
  try {
    mkdirSync(layout.dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    const existing = loadWorkspace(root, manifest.workspaceId, manifest.owner);
    // Ours but created by a concurrent create of the same owner: not ours to take over mid-flight.
    if (existing.state === "present")
      throw new RuntimeError("remote", `SSH workspace is being created concurrently: ${manifest.workspaceId}`);
    throw ownershipMismatch(layout.dir);
  }
  try {
    createManifestExclusive(layout, manifest);
  } catch (err) {
    // Our own empty directory (e.g. the disk is full): left behind it would read as foreign forever.
    if (!(err instanceof RuntimeError && err.errorClass === "ownership")) removeEmptyDir(layout.dir);
    throw err;
  }
}

function removeEmptyDir(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // Not empty: something we did not make is in it, so it stays.
  }
}

/** Re-reads the manifest and insists it is still ours; ownership errors pass through unchanged. */
export function verifyOwned(root: string, workspaceId: string, owner: string): WorkspaceManifest {
  const loaded = loadWorkspace(root, workspaceId, owner);
  if (loaded.state === "missing") throw new RuntimeError("remote", `SSH workspace was removed during the operation: ${workspaceId}`);
  return loaded.manifest;
}

/**
 * Removes a workspace directory: first renamed into `<root>/tmp` (so `<dir>` disappears
 * atomically and cannot be half-deleted under its real name), then deleted off the event loop
 * (trash.ts).
 */
export async function removeWorkspaceDir(root: string, layout: WorkspaceLayout): Promise<void> {
  ensureRootDirs(root);
  await discardTree(root, layout.dir, layout.key);
}

function lockPath(layout: WorkspaceLayout): string {
  return join(layout.dir, "create.lock");
}

/** Whether another live agent is materializing this workspace now. */
export function createInProgress(layout: WorkspaceLayout): boolean {
  return heldByOther(lockPath(layout));
}

/**
 * Marks this agent as the one materializing the workspace, so a retried create (or reconcile)
 * never works on a checkout another live agent is still writing. A lock whose holder is gone
 * (agent killed) is stale and taken over. Returns the release function.
 */
export function acquireCreateLock(layout: WorkspaceLayout, workspaceId: string): () => void {
  const release = tryLock(lockPath(layout));
  if (!release) throw new RuntimeError("remote", `SSH workspace is being created concurrently: ${workspaceId}`);
  return release;
}
