// Per-project bare object caches on the remote host (`<root>/cache/<projectKey>.git`). Directory
// sources receive only the objects the cache lacks (a thin pack fixed by index-pack); git sources
// are fetched here from their URL. Each workspace pins its commit with refs/paseo/ws/<key>, and
// checkouts borrow the cache's objects through alternates instead of copying them.
import { existsSync, mkdirSync, readdirSync, renameSync } from "node:fs";
import { dirname, join } from "node:path";
import { randomBytes } from "node:crypto";
import { RuntimeError } from "../../shared/errors.js";
import { git, gitResult, SHA_RE } from "../../shared/git-exec.js";
import { rootLayout } from "../layout.js";
import { heldByOther } from "./holder-lock.js";
import { removeTree } from "./trash.js";
import { sleep } from "../../shared/async.js";
import { gitSourceAccess, redactUrl, type GitSourceAccess } from "./git-credentials.js";

export const TRANSFER_TIMEOUT_MS = 600_000;
/** How many cache tips are offered as negotiation bases. */
const MAX_HAVES = 64;

export function cachePath(root: string, projectKey: string): string {
  return join(rootLayout(root).cacheBase, `${projectKey}.git`);
}

/** The root a cachePath() belongs to. */
export function rootOfCache(cache: string): string {
  return dirname(dirname(cache));
}

/** Submodules' objects live inside their project's cache: they go (and stay) with it. */
const moduleCaches = (cache: string) => join(cache, "paseo-modules");

/**
 * The store of every submodule's objects of a project; a workspace pins each submodule's commit as
 * `refs/paseo/ws/<workspace key>/<submodule key>`. (Earlier versions kept a cache per submodule
 * beside it, `<key>.git`: unused now, they go with the project cache.)
 */
export function moduleStorePath(cache: string): string {
  return join(moduleCaches(cache), "store.git");
}

export function workspaceRef(key: string): string {
  return `refs/paseo/ws/${key}`;
}

/**
 * Held by reconcile while it decides on and moves away an unused cache. A create takes no lock: it
 * records the cache in its manifest first and then waits here until no prune is under way, so a
 * prune either saw that manifest (and kept the cache) or finished before the create looked.
 */
export function pruneLockPath(root: string, projectKey: string): string {
  return join(rootLayout(root).cacheBase, `${projectKey}.prune-lock`);
}

const PRUNE_WAIT_MS = 60_000;

async function waitForPrune(root: string, projectKey: string): Promise<void> {
  const lock = pruneLockPath(root, projectKey);
  const deadline = Date.now() + PRUNE_WAIT_MS;
  while (heldByOther(lock)) {
    if (Date.now() > deadline)
      throw new RuntimeError("remote", `project cache is locked by a reconcile for over ${PRUNE_WAIT_MS} ms: ${lock}`);
    await sleep(50);
  }
}

/**
 * Creates the cache if needed; initialised aside and renamed into place so it is never half-made.
 * Call only once the workspace's manifest names `projectKey` (reconcile keeps such caches).
 */
export async function ensureCache(root: string, projectKey: string): Promise<string> {
  const path = cachePath(root, projectKey);
  await waitForPrune(root, projectKey);
  return initCacheAt(root, path);
}

/** Creates the bare cache at `path` unless it exists (made aside in `<root>/tmp`, then renamed). */
export async function initCacheAt(root: string, path: string): Promise<string> {
  if (existsSync(join(path, "objects"))) return path;
  const l = rootLayout(root);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  mkdirSync(l.tmpBase, { recursive: true, mode: 0o700 });
  const tmp = join(l.tmpBase, `cache-${randomBytes(6).toString("hex")}.git`);
  try {
    await git(["init", "--bare", "--quiet", tmp]);
    // Nothing may ever prune objects a checkout borrows through alternates.
    await git(["config", "gc.auto", "0"], { cwd: tmp });
    await git(["config", "core.logAllRefUpdates", "false"], { cwd: tmp });
    renameSync(tmp, path);
  } catch (err) {
    await removeTree(tmp);
    // A concurrent create won the race: its cache is as good as ours.
    if (existsSync(join(path, "objects"))) return path;
    throw err;
  }
  return path;
}

export async function hasCommit(cache: string, commit: string): Promise<boolean> {
  const r = await gitResult(["cat-file", "-e", `${commit}^{commit}`], { cwd: cache, okCodes: [1, 128] });
  return r.code === 0;
}

/** Tips the cache already holds, newest first: the runtime packs only what they do not reach. */
export async function cacheTips(cache: string): Promise<string[]> {
  const out = await git(["for-each-ref", "--sort=-committerdate", `--count=${MAX_HAVES}`, "--format=%(objectname)"], { cwd: cache });
  return [...new Set(out.split("\n").filter((s) => SHA_RE.test(s)))];
}

export async function pinCommit(cache: string, key: string, commit: string): Promise<void> {
  await git(["update-ref", workspaceRef(key), commit], { cwd: cache });
}

export async function unpinCommit(root: string, projectKey: string | null, key: string): Promise<void> {
  if (!projectKey) return;
  const cache = cachePath(root, projectKey);
  if (!existsSync(join(cache, "objects"))) return;
  await git(["update-ref", "-d", workspaceRef(key)], { cwd: cache });
  // The same workspace's pins of its submodules: `<ref>/<submodule key>` in the store (`<ref>` in
  // an earlier version's per-submodule caches).
  const modules = moduleCaches(cache);
  for (const name of existsSync(modules) ? readdirSync(modules) : []) {
    const cwd = join(modules, name);
    const refs = await git(["for-each-ref", "--format=delete %(refname)", workspaceRef(key)], { cwd });
    if (refs.trim()) await git(["update-ref", "--stdin"], { cwd, input: refs });
  }
}

export interface ResolvedRevision {
  commit: string;
  /** "" = detached. */
  branch: string;
}

function rejectOptionLike(value: string, what: string): void {
  if (value.startsWith("-")) throw new RuntimeError("input", `${what} must not start with "-": ${value}`);
}

async function revParse(cache: string, rev: string): Promise<string | null> {
  const r = await gitResult(["rev-parse", "--verify", "--quiet", `${rev}^{commit}`], { cwd: cache, okCodes: [1, 128] });
  const sha = r.stdout.trim();
  return r.code === 0 && SHA_RE.test(sha) ? sha : null;
}

async function defaultBranch(source: GitSourceAccess, shown: string): Promise<string> {
  const out = await git(["ls-remote", "--symref", source.url, "HEAD"], {
    timeoutMs: TRANSFER_TIMEOUT_MS,
    errorClass: "remote-dependency",
    env: source.env,
  });
  const m = /^ref: refs\/heads\/(\S+)\tHEAD$/m.exec(out);
  if (!m?.[1]) throw new RuntimeError("remote-dependency", `Git source has no default branch: ${shown}`);
  return m[1];
}

/**
 * Fetches a git source into its cache on this host (so the URL must be reachable from here) and
 * resolves the revision: "" → the default branch, a branch → that branch, a tag or sha → detached.
 * Credentials in the URL travel to git by its environment, never its command line.
 */
export async function fetchGitSource(cache: string, url: string, revision: string): Promise<ResolvedRevision> {
  const shown = redactUrl(url);
  rejectOptionLike(shown, "Git source url");
  rejectOptionLike(revision, "Git revision");
  const source = gitSourceAccess(url);
  const remote = { cwd: cache, timeoutMs: TRANSFER_TIMEOUT_MS, errorClass: "remote-dependency" as const, env: source.env };
  const branchWanted = revision === "" ? await defaultBranch(source, shown) : revision.replace(/^refs\/heads\//, "");
  await git(["fetch", "--quiet", "--force", "--no-tags", source.url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"], remote);
  const onBranch = await revParse(cache, `refs/heads/${branchWanted}`);
  if (onBranch) return { commit: onBranch, branch: branchWanted };
  const tagged = await revParse(cache, `refs/tags/${revision.replace(/^refs\/tags\//, "")}`);
  if (tagged) return { commit: tagged, branch: "" };
  if (/^[0-9a-f]{4,64}$/.test(revision)) {
    let sha = await revParse(cache, revision);
    // A commit no branch or tag reaches: servers that allow it can serve it by id.
    if (!sha && SHA_RE.test(revision)) {
      await git(["fetch", "--quiet", "--no-tags", source.url, revision], { ...remote, okCodes: [1, 128] });
      sha = await revParse(cache, revision);
    }
    if (sha) return { commit: sha, branch: "" };
  }
  throw new RuntimeError("input", `Git revision not found at the source: ${revision}`);
}

/** Whether a cache directory was last touched longer ago than `ms` (in-flight creates are young). */
