// Reads, verifies and writes workspace manifests. Every agent operation on a workspace goes
// through loadWorkspace() first, so ownership is checked before anything is read or changed
// (the refusal texts are fixed; the ownership tests compare them).
import { readFileSync, renameSync, lstatSync, linkSync, rmSync, openSync, writeSync, fsyncSync, closeSync } from "node:fs";
import { basename, join } from "node:path";
import { randomBytes } from "node:crypto";
import { RuntimeError } from "../../shared/errors.js";
import { MANIFEST_MARKER, type WorkspaceManifest } from "./manifest.js";
import { WORKSPACE_PREFIX, workspaceKey, workspaceLayout, type WorkspaceLayout } from "../layout.js";

export type LoadedWorkspace =
  { state: "missing"; layout: WorkspaceLayout } | { state: "present"; layout: WorkspaceLayout; manifest: WorkspaceManifest };

const PHASES = new Set(["materializing", "ready", "paused"]);

function isStringMap(v: unknown): v is Record<string, string> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === "string");
}

/** Parses a manifest strictly; returns null when it is not one of ours for `workspaceId`. */
export function parseManifest(text: string, workspaceId: string, dirName: string): WorkspaceManifest | null {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return null;
  }
  if (typeof m !== "object" || m === null || Array.isArray(m)) return null;
  if (m.marker !== MANIFEST_MARKER) return null;
  if (m.workspaceId !== workspaceId) return null;
  if (dirName !== WORKSPACE_PREFIX + workspaceKey(workspaceId)) return null;
  if (typeof m.owner !== "string" || typeof m.phase !== "string" || !PHASES.has(m.phase)) return null;
  if (typeof m.branch !== "string" || typeof m.commit !== "string" || typeof m.workspaceRoot !== "string") return null;
  if (!(m.projectKey === null || typeof m.projectKey === "string")) return null;
  if (!(m.scope === undefined || typeof m.scope === "string")) return null;
  if (!isStringMap(m.lifecycleEnvironment)) return null;
  if (typeof m.createdAt !== "string" || typeof m.updatedAt !== "string") return null;
  return m as unknown as WorkspaceManifest;
}

export function ownershipMismatch(dir: string): RuntimeError {
  return new RuntimeError("ownership", `SSH workspace ownership mismatch: ${dir}`);
}

export function ownerMismatch(dir: string): RuntimeError {
  return new RuntimeError("ownership", `SSH workspace runtime owner mismatch: ${dir}`);
}

/**
 * Loads the workspace directory for `workspaceId` and verifies it belongs to `owner`.
 * Missing directory → `missing`. A directory without a valid manifest for this id, or with another
 * owner, throws the scenario texts; nothing is modified either way.
 */
export function loadWorkspace(root: string, workspaceId: string, owner: string): LoadedWorkspace {
  const layout = workspaceLayout(root, workspaceId);
  let st;
  try {
    st = lstatSync(layout.dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { state: "missing", layout };
    throw ownershipMismatch(layout.dir);
  }
  if (!st.isDirectory()) throw ownershipMismatch(layout.dir);
  let text: string;
  try {
    text = readFileSync(layout.manifest, "utf8");
  } catch {
    throw ownershipMismatch(layout.dir);
  }
  const manifest = parseManifest(text, workspaceId, basename(layout.dir));
  if (!manifest) throw ownershipMismatch(layout.dir);
  if (manifest.owner !== owner) throw ownerMismatch(layout.dir);
  return { state: "present", layout, manifest };
}

/**
 * Writes the first manifest of a freshly claimed directory without ever replacing one: the temp
 * file is hard-linked to the final name, which fails if anyone else put a manifest there first.
 */
export function createManifestExclusive(layout: WorkspaceLayout, manifest: WorkspaceManifest): void {
  const tmp = join(layout.dir, `.manifest.${randomBytes(6).toString("hex")}.tmp`);
  writeDurable(tmp, JSON.stringify(manifest, null, 2) + "\n");
  try {
    linkSync(tmp, layout.manifest);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") throw ownershipMismatch(layout.dir);
    throw err;
  } finally {
    rmSync(tmp, { force: true });
  }
}

/**
 * Replaces the manifest of a directory that must still exist. It never creates directories, so a
 * workspace removed concurrently is not resurrected.
 */
export function replaceManifest(layout: WorkspaceLayout, manifest: WorkspaceManifest): WorkspaceManifest {
  const next = { ...manifest, updatedAt: new Date().toISOString() };
  const tmp = join(layout.dir, `.manifest.${randomBytes(6).toString("hex")}.tmp`);
  writeDurable(tmp, JSON.stringify(next, null, 2) + "\n");
  try {
    renameSync(tmp, layout.manifest);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  return next;
}

/**
 * Creates `path` (never overwriting) and flushes it to disk before it is renamed into place: a
 * crash must not leave an empty manifest, which would read as an ownership mismatch forever. A
 * write may take fewer bytes than offered; a failed one (a full disk) leaves no file behind.
 */
function writeDurable(path: string, text: string): void {
  const fd = openSync(path, "wx", 0o600);
  let ok = false;
  try {
    const buf = Buffer.from(text, "utf8");
    for (let off = 0; off < buf.length;) {
      const n = writeSync(fd, buf, off, buf.length - off);
      if (n <= 0) throw new Error(`write of ${path} made no progress`);
      off += n;
    }
    fsyncSync(fd);
    ok = true;
  } finally {
    closeSync(fd);
    if (!ok) rmSync(path, { force: true });
  }
}
