// Marks a remote root as ours. Reconcile deletes things by name under the root (caches, trash),
// which is only safe in a directory we created: a root pointed at some pre-existing directory
// (a home, a project folder) must not lose a `cache/x.git` or `tmp/trash-*` it happened to hold.
// The marker is written on first use when the root holds nothing but our own layout (a fresh
// root, or one made by an earlier version that had no marker); a root with anything else in it is
// never marked, and reconcile refuses to touch it. The bootstrap has already checked that the
// root is the login user's and closed to others before this code runs.
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { RuntimeError } from "../shared/errors.js";
import { TEST_HOOKS_FILE } from "./test-hooks.js";

export const ROOT_MARKER = ".paseo-ssh-root";
/** Every name our layout (layout.ts) puts directly under a root, and the tests' hooks file. */
const OUR_NAMES = new Set(["agent", "workspaces", "cache", "run", "tmp", ROOT_MARKER, TEST_HOOKS_FILE]);

export function isMarkedRoot(root: string): boolean {
  return existsSync(join(root, ROOT_MARKER));
}

/** Marks `root` if it is unmarked and holds only our layout; otherwise leaves it as it is. */
export function markRoot(root: string): void {
  if (isMarkedRoot(root)) return;
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return;
  }
  if (!names.every((n) => OUR_NAMES.has(n))) return;
  try {
    writeFileSync(join(root, ROOT_MARKER), "paseo-ssh-runtime remote root\n", { mode: 0o600, flag: "wx" });
  } catch {
    // Marked meanwhile, or not writable now (a full disk): the operation goes on; a later one marks it.
  }
}

/** Refuses an operation that removes things by name from a root that is not marked as ours. */
export function requireMarkedRoot(root: string, what: string): void {
  if (isMarkedRoot(root)) return;
  throw new RuntimeError(
    "ownership",
    `remote root ${root} holds files paseo-ssh-runtime did not create (no ${ROOT_MARKER} marker), so ${what} left it untouched; give the runtime a directory of its own as root`,
  );
}
