// Names the host reports are the host's word: before one becomes part of a ref in the Paseo side
// repository it must be a branch name git itself would accept (git check-ref-format's rules), so
// no crafted name can leave the runtime's namespace (`..`, a leading `/`, `@{`) or address another
// ref. The namespace itself is derived from the workspace id, never taken from the host.
import { sha256Hex } from "../shared/sha256.js";

/** Every ref the runtime writes for a workspace lives below this (docs/workspaces.md). */
export const NAMESPACE_ROOT = "refs/paseo-ssh";
/** Branch names longer than this are refused (git's own limit is the file system's). */
const MAX_NAME = 250;

/** True for a name git accepts as `refs/heads/<name>` (git check-ref-format). */
export function isSafeBranchName(name: string): boolean {
  if (name.length === 0 || name.length > MAX_NAME) return false;
  // Control characters, space and the characters git reserves for revision syntax.
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(name)) return false;
  if (name.startsWith("-") || name.startsWith("/") || name.endsWith("/") || name.endsWith(".")) return false;
  if (name.includes("//") || name.includes("..") || name.includes("@{") || name === "@") return false;
  return name.split("/").every((part) => !part.startsWith(".") && !part.endsWith(".lock"));
}

/** `refs/paseo-ssh/<id>`: the workspace id where it is a plain ref component, else `ws-<hash of it>`. */
export function workNamespace(workspaceId: string): string {
  const plain = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/.test(workspaceId) && isSafeBranchName(workspaceId);
  return `${NAMESPACE_ROOT}/${plain ? workspaceId : `ws-${sha256Hex(workspaceId).slice(0, 20)}`}`;
}
