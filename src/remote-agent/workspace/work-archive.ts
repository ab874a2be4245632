// The host's safety net for a workspace's work: before a workspace directory is removed, work that
// the runtime did not prove it brought back (its token does not name the state found, or it has no
// repository to bring it to: a git source, a Paseo side repository that was gone) is kept. The
// checkout's git directory is moved (one rename, whatever its size) to
// `<root>/archive/<key>-<time>.git` with a record beside it, and kept for ARCHIVE_KEEP_MS; it
// borrows its base objects from the project cache, which reconcile keeps while an archive uses it.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ArchivedWork } from "../../shared/agent-api.js";
import { isRecord, parseJson } from "../../shared/guards.js";
import type { WorkspaceLayout } from "../layout.js";
import type { WorkspaceManifest } from "./manifest.js";
import { holdsWork, readWorkState } from "./work-state.js";
import { removeTree } from "./trash.js";

/** How long archived work is kept on the host (docs/workspaces.md). */
export const ARCHIVE_KEEP_MS = 14 * 24 * 3600_000;
const RECORD_SUFFIX = ".json";

export function archiveBase(root: string): string {
  return join(root, "archive");
}

interface ArchiveRecord {
  workspaceId: string;
  owner: string;
  projectKey: string | null;
  archivedAt: string;
  until: string;
}

/**
 * Keeps the workspace's work unless `mirrored` names exactly the state found (or there is none);
 * the archive's place, or null when nothing needed keeping. Its processes must be gone already.
 */
export async function keepUnmirroredWork(
  root: string,
  layout: WorkspaceLayout,
  manifest: WorkspaceManifest,
  mirrored: string | null | undefined,
): Promise<ArchivedWork | null> {
  if (manifest.phase === "materializing" || !existsSync(join(layout.checkout, ".git", "HEAD"))) return null;
  const state = await readWorkState(layout, manifest, true);
  if (mirrored && mirrored === state.token) return null;
  if (!(await holdsWork(layout.checkout, state))) return null;
  const base = archiveBase(root);
  mkdirSync(base, { recursive: true, mode: 0o700 });
  const now = new Date();
  const name = `${layout.key}-${now.toISOString().replace(/[:.]/g, "-")}`;
  const path = join(base, `${name}.git`);
  const until = new Date(now.getTime() + ARCHIVE_KEEP_MS).toISOString();
  const record: ArchiveRecord = {
    workspaceId: manifest.workspaceId,
    owner: manifest.owner,
    projectKey: manifest.projectKey,
    archivedAt: now.toISOString(),
    until,
  };
  // The record first: an archive without one would be pruned as unknown, never kept without a date.
  writeFileSync(join(base, name + RECORD_SUFFIX), JSON.stringify(record, null, 2) + "\n", { mode: 0o600 });
  renameSync(join(layout.checkout, ".git"), path);
  return { path, until };
}

function readRecords(root: string): { name: string; record: ArchiveRecord | null }[] {
  const base = archiveBase(root);
  if (!existsSync(base)) return [];
  return readdirSync(base)
    .filter((n) => n.endsWith(".git"))
    .map((n) => {
      const name = n.slice(0, -4);
      let record: ArchiveRecord | null = null;
      try {
        const raw = parseJson(readFileSync(join(base, name + RECORD_SUFFIX), "utf8"));
        if (isRecord(raw) && typeof raw.until === "string") record = raw as unknown as ArchiveRecord;
      } catch {
        // no record: kept until the next prune decides by its age alone
      }
      return { name, record };
    });
}

/** Project caches the kept archives borrow objects from (reconcile must not prune them). */
export function archivedProjectKeys(root: string): Set<string> {
  const keys = new Set<string>();
  for (const { record } of readRecords(root)) if (record?.projectKey) keys.add(record.projectKey);
  return keys;
}

/** Deletes archives whose time is up; returns how many. */
export async function pruneArchives(root: string, now = Date.now()): Promise<number> {
  let pruned = 0;
  for (const { name, record } of readRecords(root)) {
    const until = record ? Date.parse(record.until) : NaN;
    if (!(until <= now)) continue;
    await removeTree(join(archiveBase(root), `${name}.git`));
    rmSync(join(archiveBase(root), name + RECORD_SUFFIX), { force: true });
    pruned++;
  }
  return pruned;
}
