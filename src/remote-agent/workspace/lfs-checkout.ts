// Git LFS in a workspace's checkout. Every checkout runs with the smudge filter skipped, so no
// create ever fails or waits because a filter cannot reach a server. Where the commit has LFS
// pointers and this host has git-lfs, the checkout becomes a normal LFS checkout: `git lfs install
// --local`, `lfs.storage` = the project's LFS store (filled from the Paseo side, lfs-store.ts),
// the repository's real endpoint, then `git lfs checkout` writes the content from the store; an
// object the store lacks is fetched from that endpoint if the host can reach it (with the host's
// own credential helpers; nothing of ours carries credentials), else its file stays a pointer and
// the runtime is told which. Only objects whose sha256 was checked are checked out (lfs-store.ts),
// and a store object that changes between its check and the end of `git lfs checkout` fails the create. Without git-lfs the lfs filter is switched off in the checkout's
// config (a system-wide `filter.lfs.required` would otherwise fail every status): pointer files,
// clean status.
import { accessSync, constants } from "node:fs";
import { join } from "node:path";
import { oneLine, RuntimeError } from "../../shared/errors.js";
import type { LfsSpec } from "../../shared/agent-api.js";
import { git, gitResult } from "../../shared/git-exec.js";
import { hasVerifiedLfsObject, lfsObjectIdentity, lfsStoreDir, uniqueObjects, verifiedLfsIdentity } from "./lfs-store.js";

const LFS_TIMEOUT_MS = 600_000;
/** Bounded: a host that cannot reach the endpoint must not hold the create for long. */
const FETCH_TIMEOUT_MS = 120_000;
/** Keeps git from running a filter it does not have (the values are git's "no filter"). */
const LFS_FILTER_OFF: Array<[string, string]> = [
  ["filter.lfs.process", ""],
  ["filter.lfs.smudge", ""],
  ["filter.lfs.clean", ""],
  ["filter.lfs.required", "false"],
];

export interface LfsCheckout {
  /** The commit's pointers (null: not known, e.g. a git source: only the smudge skip applies). */
  spec: LfsSpec | null;
  cache: string;
  /** The PATH git and git-lfs are found on (the agent's own unless a test hook replaces it). */
  searchPath: string;
  /** How long the checkout may take (a test hook shortens it; undefined: git-exec's default). */
  checkoutTimeoutMs?: number | undefined;
  /** Tells the runtime which files stay pointers and why. */
  report(paths: string[], reason: string): void;
  /** Test hook: waits between the check of the store's objects and `git lfs checkout`. */
  beforeLfsCheckout?: () => Promise<void>;
}

/** Whether git-lfs is an executable on `searchPath` (where git's filters look for it). */
export function hasGitLfs(searchPath: string): boolean {
  return searchPath.split(":").some((dir) => {
    if (dir === "") return false;
    try {
      accessSync(join(dir, "git-lfs"), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** `git lfs version`'s line, or null without git-lfs (doctor). */
export async function gitLfsVersion(searchPath: string): Promise<string | null> {
  if (!hasGitLfs(searchPath)) return null;
  const r = await gitResult(["lfs", "version"], { env: { PATH: searchPath }, timeoutMs: 10_000, okCodes: [1, 2, 128] });
  return r.code === 0 ? r.stdout.trim() : null;
}

/** What the `git checkout` of a workspace runs with. */
export function lfsCheckoutRun(plan: LfsCheckout): { args: string[]; env: Record<string, string>; timeoutMs?: number } {
  const args = hasGitLfs(plan.searchPath) ? [] : LFS_FILTER_OFF.flatMap(([k, v]) => ["-c", `${k}=${v}`]);
  const env = { GIT_LFS_SKIP_SMUDGE: "1", PATH: plan.searchPath };
  return { args, env, ...(plan.checkoutTimeoutMs !== undefined ? { timeoutMs: plan.checkoutTimeoutMs } : {}) };
}

/** Configures a fresh clone (before its checkout) for the commit's LFS files. */
export async function prepareLfsCheckout(checkout: string, plan: LfsCheckout): Promise<void> {
  if (!plan.spec) return;
  const opts = { cwd: checkout, env: { PATH: plan.searchPath } };
  if (!hasGitLfs(plan.searchPath)) {
    for (const [k, v] of LFS_FILTER_OFF) await git(["config", k, v], opts);
    return;
  }
  await git(["lfs", "install", "--local"], opts);
  await git(["config", "lfs.storage", lfsStoreDir(plan.cache)], opts);
  const e = plan.spec.endpoint;
  if (e) await git(["config", e.key, e.url], opts);
}

/**
 * git lfs checkout's path arguments for exactly `paths`: rooted (a bare name would match that name
 * in every directory) and with pattern characters escaped, in batches that fit a command line.
 */
function rootedPatterns(paths: string[], maxChars = 64 * 1024): string[][] {
  const batches: string[][] = [];
  let batch: string[] = [];
  let chars = 0;
  for (const path of paths) {
    const pattern = "/" + path.replace(/[\\*?[\]!#]/g, "\\$&");
    if (batch.length > 0 && chars + pattern.length > maxChars) {
      batches.push(batch);
      batch = [];
      chars = 0;
    }
    batch.push(pattern);
    chars += pattern.length + 1;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

/** Writes the LFS content into a checked-out tree and reports the files left as pointers. */
export async function finishLfsCheckout(checkout: string, plan: LfsCheckout): Promise<void> {
  const spec = plan.spec;
  if (!spec) return;
  const all = [...new Set(spec.pointers.map((p) => p.path))];
  if (!hasGitLfs(plan.searchPath)) {
    plan.report(all, "git-lfs is not installed on the remote host");
    return;
  }
  const opts = { cwd: checkout, env: { PATH: plan.searchPath }, timeoutMs: LFS_TIMEOUT_MS };
  const objects = uniqueObjects(spec.pointers);
  const intact = new Set<string>();
  const verify = async () => {
    intact.clear();
    for (const p of objects) if (await hasVerifiedLfsObject(plan.cache, p)) intact.add(p.oid);
  };
  await verify();
  let why = "";
  if (intact.size < objects.length) {
    // What the Paseo side did not have: from the repository's endpoint, if this host reaches it.
    const r = await gitResult(["-c", "lfs.transfer.maxretries=1", "lfs", "fetch"], {
      ...opts,
      timeoutMs: FETCH_TIMEOUT_MS,
      okCodes: [1, 2, 128],
    }).catch((err: unknown) => ({ code: -1, stderr: err instanceof Error ? err.message : String(err) }));
    if (r.code !== 0)
      why = oneLine(
        r.stderr
          .split("\n")
          .filter((l) => l.trim() !== "")
          .pop() ?? `exit ${r.code}`,
      ).slice(0, 200);
    await verify();
  }
  // git-lfs copies whatever the store holds, unchecked: after the copy each object must still be
  // the very file whose sha256 was checked (and absent where none was). Compared with the identity
  // recorded at the check, not one read later: a rewrite while other objects were being hashed
  // would otherwise pass as the state to keep.
  const checked = objects.map((p) => (intact.has(p.oid) ? verifiedLfsIdentity(plan.cache, p.oid) : null)).join("\n");
  await plan.beforeLfsCheckout?.();
  if (spec.only) for (const paths of rootedPatterns(all)) await git(["lfs", "checkout", "--", ...paths], opts);
  else await git(["lfs", "checkout"], opts);
  if (objects.map((p) => lfsObjectIdentity(plan.cache, p.oid)).join("\n") !== checked)
    throw new RuntimeError(
      "remote",
      `the Git LFS store ${lfsStoreDir(plan.cache)} on the remote host changed between the check of its objects and their checkout (something there writes to it); create the workspace again`,
    );
  const left = [...new Set(spec.pointers.filter((p) => !intact.has(p.oid)).map((p) => p.path))];
  if (left.length > 0) {
    const reason = `not in the Paseo side's LFS store and not fetched on the remote host${why ? ` (${why})` : ""}`;
    plan.report(left, reason);
  }
}
