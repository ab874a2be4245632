// Where everything lives under the remote root. Names are derived from hashes of ids, never from
// the ids themselves, so hostile workspace or exec ids cannot address a path outside the root.
import { createHash } from "node:crypto";
import { join } from "node:path";

export const WORKSPACE_PREFIX = "paseo-ws-";

/** First 20 hex chars of sha256(id): the same derivation as Paseo's Docker reference. */
export function workspaceKey(workspaceId: string): string {
  return createHash("sha256").update(workspaceId, "utf8").digest("hex").slice(0, 20);
}

export function hashName(value: string, length = 32): string {
  return createHash("sha256").update(value, "utf8").digest("hex").slice(0, length);
}

export interface RootLayout {
  root: string;
  /** Uploaded agent builds, one directory per content hash. */
  agentBase: string;
  /** Workspace directories `paseo-ws-<key>`. */
  workspacesBase: string;
  /** Per-project bare object caches. */
  cacheBase: string;
  /** Unix sockets for live execs (0700). */
  runBase: string;
  /** Scratch space for uploads and atomic writes. */
  tmpBase: string;
}

export function rootLayout(root: string): RootLayout {
  return {
    root,
    agentBase: join(root, "agent"),
    workspacesBase: join(root, "workspaces"),
    cacheBase: join(root, "cache"),
    runBase: join(root, "run"),
    tmpBase: join(root, "tmp"),
  };
}

export interface WorkspaceLayout {
  key: string;
  /** `<root>/workspaces/paseo-ws-<key>`; the ownership boundary. */
  dir: string;
  /** Ownership and state record, outside the checkout. */
  manifest: string;
  /** The git checkout (the workspace root is this or a subdirectory of it). */
  checkout: string;
  /** Per-exec identity records and tombstones. */
  execs: string;
}

export function workspaceLayout(root: string, workspaceId: string): WorkspaceLayout {
  return workspaceLayoutOfKey(root, workspaceKey(workspaceId));
}

/** The layout of the directory `paseo-ws-<key>` (sweeps that list directories, not ids). */
export function workspaceLayoutOfKey(root: string, key: string): WorkspaceLayout {
  const dir = join(rootLayout(root).workspacesBase, WORKSPACE_PREFIX + key);
  return {
    key,
    dir,
    manifest: join(dir, "manifest.json"),
    checkout: join(dir, "checkout"),
    execs: join(dir, "execs"),
  };
}
