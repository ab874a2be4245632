// Submodules on the host, from objects the runtime shipped: each one's objects go into its own
// cache inside the project's cache (`<cache>/paseo-modules/<key>.git`, filled like the project's:
// only what it lacks), and the checkout gets each submodule as `git submodule update --init
// --recursive` would leave it: its git dir in `<parent git dir>/modules/<name>` (objects borrowed
// from its cache), a `.git` file and `core.worktree` pointing at each other by relative paths (the
// checkout is built aside and renamed), `origin` = the URL from .gitmodules, registered in its
// parent's config as an initialised, active submodule, detached at the recorded commit, with the
// branch, remote-tracking branches and origin/HEAD its clone would have made. No
// transport is involved, so git's `protocol.file.allow` never applies; nothing needs a network.
// Its LFS files are checked out as the superproject's are (lfs-checkout.ts): the smudge filter
// skipped (a host's system-wide git-lfs filter would otherwise download from the .gitmodules URL,
// failing or hanging the create), then the content from the project's LFS store.
import { existsSync, lstatSync, readdirSync, realpathSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { RuntimeError } from "../../shared/errors.js";
import { git, gitResult } from "../../shared/git-exec.js";
import { isRecord } from "../../shared/guards.js";
import { checkoutFootprint, requireSpace } from "../../shared/disk-space.js";
import { SubmoduleList, type SubmoduleSpec } from "../../shared/agent-api.js";
import { parseRequest } from "./common.js";
import { initCacheAt, moduleCachePath, pinCommit } from "./git-cache.js";
import { fillObjects, type Intake } from "./object-fill.js";
import { writeShallowFile } from "./shallow.js";
import { verifyCheckout } from "./checkout-verify.js";
import { diskInfo } from "./disk.js";
import { finishLfsCheckout, lfsCheckoutRun, prepareLfsCheckout, type LfsCheckout } from "./lfs-checkout.js";

/** A submodule whose objects are in its cache on this host. */
export interface CachedSubmodule {
  spec: SubmoduleSpec;
  cache: string;
}

/** A submodule listed without a shallow boundary has its complete history. */
export function withShallowDefaults(v: unknown): unknown {
  return Array.isArray(v) ? v.map((m: unknown) => (isRecord(m) && m.shallow === undefined ? { ...m, shallow: [] } : m)) : v;
}

/** Checks the request's submodule list (SubmoduleList): paths inside the checkout, names git accepts, parents first. */
export function parseSubmodules(v: unknown): SubmoduleSpec[] {
  if (v === undefined) return [];
  return parseRequest(SubmoduleList, withShallowDefaults(v)).map(({ key, name, path, parent, commit, url, shallow, lfs, origin }) => ({
    key,
    name,
    path,
    parent,
    commit,
    url,
    shallow,
    ...(lfs ? { lfs: { pointers: lfs.pointers, endpoint: lfs.endpoint } } : {}),
    ...(origin ? { origin: { branches: origin.branches.map((b) => ({ name: b.name, commit: b.commit })), head: origin.head } } : {}),
  }));
}

/** Fills each submodule's cache (asking the runtime for what it lacks) and pins its commit there. */
export async function fillSubmodules(intake: Intake, cache: string, specs: SubmoduleSpec[], pin: string): Promise<CachedSubmodule[]> {
  const cached: CachedSubmodule[] = [];
  for (const spec of specs) {
    const moduleCache = await initCacheAt(intake.ctx.root, moduleCachePath(cache, spec.key));
    const tips = (spec.origin?.branches ?? []).map((b) => b.commit);
    await fillObjects(intake, moduleCache, { commit: spec.commit, shallow: spec.shallow, module: spec.key, tips });
    await pinCommit(moduleCache, pin, spec.commit);
    cached.push({ spec, cache: moduleCache });
  }
  return cached;
}

const setConfig = (file: string, key: string, value: string) => git(["config", "--file", file, key, value]);

/**
 * The refs a clone of the submodule's URL leaves (what `git submodule status`, `git branch -a` and
 * `git submodule foreach git pull` read): `refs/remotes/origin/*`, `origin/HEAD`, and the branch
 * origin's HEAD names, at its remote-tracking commit and tracking it. HEAD stays detached.
 */
async function writeOriginRefs(gitDir: string, spec: SubmoduleSpec): Promise<void> {
  const origin = spec.origin;
  if (!origin) return;
  const updates = origin.branches.map((b) => `update refs/remotes/origin/${b.name} ${b.commit}\n`);
  const head = origin.head === null ? undefined : origin.branches.find((b) => b.name === origin.head);
  if (head) updates.push(`update refs/heads/${head.name} ${head.commit}\n`);
  await git(["--git-dir", gitDir, "update-ref", "--stdin"], { input: updates.join("") });
  if (!head) return;
  await git(["--git-dir", gitDir, "symbolic-ref", "refs/remotes/origin/HEAD", `refs/remotes/origin/${head.name}`]);
  const config = join(gitDir, "config");
  await setConfig(config, `branch.${head.name}.remote`, "origin");
  await setConfig(config, `branch.${head.name}.merge`, `refs/heads/${head.name}`);
}

/**
 * Completes a checkout built in `dir` (fresh or a taken spare) before it is renamed into place:
 * the superproject's shallow boundary, then every submodule, parents before their children.
 * `lfs` is the superproject's LFS plan: each submodule's uses the same store and reports its
 * pointer files by their paths from the top level.
 */
export async function finishCheckout(dir: string, shallow: string[], modules: CachedSubmodule[], lfs: LfsCheckout): Promise<void> {
  writeShallowFile(join(dir, ".git"), shallow);
  const top = realpathSync(dir);
  const gitDirs: string[] = [];
  for (const { spec, cache } of modules) {
    const parentGitDir = spec.parent < 0 ? join(dir, ".git") : gitDirs[spec.parent]!;
    const gitDir = join(parentGitDir, "modules", spec.name);
    const workTree = join(dir, spec.path);
    // The parent's checkout made it an empty directory; anything else (a symlink on the way out,
    // a file) is not a place git would put a submodule.
    let real: string | null = null;
    try {
      real = lstatSync(workTree).isDirectory() ? realpathSync(workTree) : null;
    } catch {
      real = null;
    }
    if (real !== join(top, spec.path) || readdirSync(workTree).length > 0 || existsSync(gitDir))
      throw new RuntimeError("input", `Submodule ${spec.path} is not an empty directory in the checkout`);
    const disk = diskInfo(dir);
    requireSpace(disk, await checkoutFootprint(cache, spec.commit, disk.blockSize), `the checkout of submodule ${spec.path}`);

    await git(["init", "--bare", "--quiet", gitDir]);
    writeFileSync(join(gitDir, "objects", "info", "alternates"), `${join(cache, "objects")}\n`);
    const config = join(gitDir, "config");
    await setConfig(config, "core.bare", "false");
    await setConfig(config, "core.worktree", relative(gitDir, workTree));
    await setConfig(config, "remote.origin.url", spec.url);
    await setConfig(config, "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*");
    writeFileSync(join(workTree, ".git"), `gitdir: ${relative(workTree, gitDir)}\n`);
    writeShallowFile(gitDir, spec.shallow);
    const plan: LfsCheckout = {
      ...lfs,
      spec: spec.lfs ?? null,
      report: (paths, reason) =>
        lfs.report(
          paths.map((p) => `${spec.path}/${p}`),
          reason,
        ),
    };
    await prepareLfsCheckout(workTree, plan);
    const run = lfsCheckoutRun(plan);
    const { stderr } = await gitResult(["-c", "checkout.workers=0", ...run.args, "checkout", "--quiet", "--detach", spec.commit], {
      cwd: workTree,
      env: run.env,
      timeoutMs: 600_000,
    });
    await verifyCheckout(workTree, stderr, dir);
    await finishLfsCheckout(workTree, plan);
    await writeOriginRefs(gitDir, spec);
    // Registered last: a submodule counts as initialised once its parent's config has its URL.
    const parentConfig = join(parentGitDir, "config");
    await setConfig(parentConfig, `submodule.${spec.name}.url`, spec.url);
    await setConfig(parentConfig, `submodule.${spec.name}.active`, "true");
    gitDirs.push(gitDir);
  }
}
