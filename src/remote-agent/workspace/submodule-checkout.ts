// Submodules on the host, from objects the runtime shipped: all their objects go into one store
// inside the project's cache (`<cache>/paseo-modules/store.git`, filled like the project's cache:
// only what it lacks, in one pack for all of them), and the checkout gets each submodule as `git
// submodule update --init --recursive` would leave it: its git dir in `<parent git
// dir>/modules/<name>` (objects borrowed from the store), a `.git` file and `core.worktree`
// pointing at each other by relative paths (the checkout is built aside and renamed), `origin` =
// the URL from .gitmodules, registered in its parent's config as an initialised, active submodule,
// detached at the recorded commit, with the branch, remote-tracking branches and origin/HEAD its
// clone would have made. No transport is involved, so git's `protocol.file.allow` never applies;
// nothing needs a network. However many submodules there are, a create runs a few git processes
// for them (per nesting level), not a few per submodule: at 1,000 submodules those took minutes.
// Its LFS files are checked out as the superproject's are (lfs-checkout.ts): the smudge filter
// skipped (a host's system-wide git-lfs filter would otherwise download from the .gitmodules URL,
// failing or hanging the create), then the content from the project's LFS store.
import {
  appendFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, relative } from "node:path";
import { RuntimeError } from "../../shared/errors.js";
import { git, SHA_RE } from "../../shared/git-exec.js";
import { isRecord } from "../../shared/guards.js";
import { SubmoduleList, type SubmoduleSpec } from "../../shared/agent-api.js";
import { rootLayout } from "../layout.js";
import { parseRequest } from "./workspace-op-helpers.js";
import { cacheTips, initCacheAt, moduleStorePath, workspaceRef } from "./git-cache.js";
import type { Intake } from "./object-fill.js";
import { receivePack } from "./pack-intake.js";
import { cacheBoundary, commitsIn, reachedBoundary, recordShallow, writeShallowFile } from "./cache-shallow.js";
import { diskInfo } from "./disk.js";
import { finishLfsCheckout, lfsCheckoutRun, prepareLfsCheckout, type LfsCheckout } from "./lfs-checkout.js";
import { checkoutBatch } from "./submodule-batch.js";
import { writeIndex, type IndexEntry } from "./index-file.js";

/** A submodule whose objects are in the submodule store (`cache`) on this host. */
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
    ...(lfs ? { lfs: { pointers: lfs.pointers, endpoint: lfs.endpoint, ...(lfs.only ? { only: true } : {}) } } : {}),
    ...(origin ? { origin: { branches: origin.branches.map((b) => ({ name: b.name, commit: b.commit })), head: origin.head } } : {}),
  }));
}

/**
 * Brings every submodule's objects into the project's submodule store (one for all of them: one
 * negotiation, one pack, one index-pack however many there are) and pins their commits there.
 */
export async function fillSubmodules(intake: Intake, cache: string, specs: SubmoduleSpec[], pin: string): Promise<CachedSubmodule[]> {
  if (specs.length === 0) return [];
  const { ctx, inbox, startedAt } = intake;
  const store = await initCacheAt(ctx.root, moduleStorePath(cache));
  const { wanted, cut } = await lacking(store, specs, rootLayout(ctx.root).tmpBase);
  if (wanted.length > 0) {
    ctx.sendJson({
      type: "need-objects",
      haves: await moduleTips(store, wanted),
      modules: wanted.map((m) => m.key),
      ...(cut.length > 0 ? { shallow: cut } : {}),
      disk: diskInfo(ctx.root),
      agentMs: Date.now() - startedAt,
    });
    await receivePack(ctx.root, store, inbox);
    const held = new Set(
      await commitsIn(
        store,
        wanted.map((m) => m.commit),
      ),
    );
    const lost = wanted.find((m) => !held.has(m.commit));
    if (lost) throw new RuntimeError("remote", `objects for commit ${lost.commit} of submodule ${lost.path} did not arrive`);
  }
  for (const spec of specs) recordShallow(store, spec.shallow);
  await git(["update-ref", "--stdin"], {
    cwd: store,
    input: specs.map((m) => `update ${workspaceRef(pin)}/${m.key} ${m.commit}\n`).join(""),
  });
  return specs.map((spec) => ({ spec, cache: store }));
}

/** A submodule's remote-tracking commits: its git dir's refs name them, so the store holds them too. */
const originTips = (spec: SubmoduleSpec): string[] => (spec.origin?.branches ?? []).map((b) => b.commit);

/**
 * The submodules whose commit (or a remote-tracking commit) the store lacks, or holds with less history than their source has
 * (cut at a boundary the source is not cut at), and the store's boundary those reach.
 */
async function lacking(store: string, specs: SubmoduleSpec[], tmpBase: string): Promise<{ wanted: SubmoduleSpec[]; cut: string[] }> {
  const held = new Set(
    await commitsIn(
      store,
      specs.flatMap((m) => [m.commit, ...originTips(m)]),
    ),
  );
  const boundary = await cacheBoundary(store);
  const wanted: SubmoduleSpec[] = [];
  const cut = new Set<string>();
  for (const spec of specs) {
    if (!held.has(spec.commit) || originTips(spec).some((c) => !held.has(c))) {
      wanted.push(spec);
      boundary.forEach((c) => cut.add(c));
      continue;
    }
    if (boundary.length === 0) continue;
    const reached = await reachedBoundary(store, spec.commit, tmpBase);
    if (!reached.some((c) => !spec.shallow.includes(c))) continue;
    wanted.push(spec);
    reached.forEach((c) => cut.add(c));
  }
  return { wanted, cut: [...cut] };
}

/** Negotiation bases: the commits earlier workspaces pinned for these submodules, and the store's newest. */
async function moduleTips(store: string, wanted: SubmoduleSpec[]): Promise<string[]> {
  const patterns = wanted.length <= 1000 ? wanted.map((m) => `refs/paseo/ws/*/${m.key}`) : [];
  const own = patterns.length
    ? await git(["for-each-ref", "--sort=-committerdate", "--count=64", "--format=%(objectname)", ...patterns], { cwd: store })
    : "";
  return [...new Set([...own.split("\n").filter((s) => SHA_RE.test(s)), ...(await cacheTips(store))])];
}

/** A config value as git reads it back whatever it holds (quoted; backslash and quote escaped). */
const quoted = (v: string) => `"${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;

/**
 * The [core] section a fresh git dir on this filesystem gets (`git init` probes it: file modes,
 * case, symlinks), once per checkout; each submodule's config is written from it.
 */
async function coreConfig(scratchBase: string): Promise<string> {
  const dir = mkdtempSync(join(scratchBase, ".paseo-gitdir-"));
  try {
    await git(["init", "--bare", "--quiet", "--template=", dir]);
    const text = readFileSync(join(dir, "config"), "utf8");
    if (!/^\tbare = true$/m.test(text)) throw new RuntimeError("remote", "git init wrote an unexpected config");
    return text;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A submodule's git dir, written as `git submodule update` leaves it: detached at its commit, objects borrowed from the store. */
function writeGitDir(gitDir: string, core: string, spec: SubmoduleSpec, workTree: string, store: string, index: IndexEntry[]): void {
  for (const d of ["refs/heads", "refs/tags", "objects/info", "objects/pack", "info"]) mkdirSync(join(gitDir, d), { recursive: true });
  writeFileSync(join(gitDir, "HEAD"), `${spec.commit}\n`);
  // The reflog entry of the checkout `git submodule update` makes: `git status` and `git branch`
  // read it to say "HEAD detached at <commit>" rather than "(no branch)".
  mkdirSync(join(gitDir, "logs"), { recursive: true });
  const from = spec.origin?.head ?? spec.commit;
  writeFileSync(
    join(gitDir, "logs", "HEAD"),
    `${"0".repeat(spec.commit.length)} ${spec.commit} paseo-ssh <paseo-ssh@localhost> ${Math.floor(Date.now() / 1000)} +0000\tcheckout: moving from ${from} to ${spec.commit}\n`,
  );
  writeFileSync(
    join(gitDir, "config"),
    core.replace(/^\tbare = true$/m, `\tbare = false\n\tworktree = ${quoted(relative(gitDir, workTree))}`) +
      `[remote "origin"]\n\turl = ${quoted(spec.url)}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n` +
      writeOriginRefs(gitDir, spec),
  );
  writeFileSync(join(gitDir, "objects", "info", "alternates"), `${join(store, "objects")}\n`);
  writeShallowFile(gitDir, spec.shallow);
  writeIndex(join(gitDir, "index"), index);
  writeFileSync(join(workTree, ".git"), `gitdir: ${relative(workTree, gitDir)}\n`);
}

/**
 * The refs a clone of the submodule's URL leaves (what `git submodule status`, `git branch -a` and
 * `git submodule foreach git pull` read): `refs/remotes/origin/*`, `origin/HEAD`, and the branch
 * origin's HEAD names, at its remote-tracking commit and tracking it. HEAD stays detached. Written
 * as files with the rest of the git dir (the names are checked by the request's schema).
 */
function writeOriginRefs(gitDir: string, spec: SubmoduleSpec): string {
  const origin = spec.origin;
  if (!origin) return "";
  const ref = (name: string, value: string) => {
    mkdirSync(dirname(join(gitDir, name)), { recursive: true });
    writeFileSync(join(gitDir, name), `${value}\n`);
  };
  for (const b of origin.branches) ref(`refs/remotes/origin/${b.name}`, b.commit);
  const head = origin.head === null ? undefined : origin.branches.find((b) => b.name === origin.head);
  if (!head) return "";
  ref(`refs/heads/${head.name}`, head.commit);
  ref("refs/remotes/origin/HEAD", `ref: refs/remotes/origin/${head.name}`);
  return `[branch ${quoted(head.name)}]\n\tremote = origin\n\tmerge = ${quoted(`refs/heads/${head.name}`)}\n`;
}

/**
 * Completes a checkout built in `dir` (fresh or a taken spare) before it is renamed into place:
 * the superproject's shallow boundary, then every submodule, level by level (a nested one's
 * directory exists once its parent's files are written): each level's files in one checkout
 * (submodule-batch.ts), then each one's git dir, its LFS content and its registration in its
 * parent's config. `lfs` is the superproject's LFS plan: each submodule's uses the same store and
 * reports its pointer files by their paths from the top level.
 */
export async function finishCheckout(dir: string, shallow: string[], modules: CachedSubmodule[], lfs: LfsCheckout): Promise<void> {
  writeShallowFile(join(dir, ".git"), shallow);
  if (modules.length === 0) return;
  const top = realpathSync(dir);
  const core = await coreConfig(dir);
  const gitDirs: string[] = [];
  const depth: number[] = [];
  for (const { spec } of modules) {
    depth.push(spec.parent < 0 ? 0 : depth[spec.parent]! + 1);
    gitDirs.push(join(spec.parent < 0 ? join(dir, ".git") : gitDirs[spec.parent]!, "modules", spec.name));
  }
  for (let level = 0; level <= Math.max(...depth); level++) {
    const batch = modules.map((m, i) => ({ ...m, i })).filter((m) => depth[m.i] === level);
    for (const { spec, i } of batch) {
      const workTree = join(dir, spec.path);
      // The parent's checkout made it an empty directory; anything else (a symlink on the way out,
      // a file) is not a place git would put a submodule.
      let real: string | null = null;
      try {
        real = lstatSync(workTree).isDirectory() ? realpathSync(workTree) : null;
      } catch {
        real = null;
      }
      if (real !== join(top, spec.path) || readdirSync(workTree).length > 0 || existsSync(gitDirs[i]!))
        throw new RuntimeError("input", `Submodule ${spec.path} is not an empty directory in the checkout`);
    }
    const store = batch[0]!.cache;
    // Smudge skipped (and without git-lfs on the host the filter off) as for the superproject's checkout.
    const run = lfsCheckoutRun({ ...lfs, spec: null });
    const indexes = await checkoutBatch(
      store,
      dir,
      batch.map(({ spec }) => ({ commit: spec.commit, workTree: join(dir, spec.path), path: spec.path })),
      run,
    );
    // Registered in its parent's config once its files and git dir are in place: a submodule
    // counts as initialised once its parent's config has its URL.
    const registered = new Map<string, string>();
    for (const [n, { spec, i }] of batch.entries()) {
      const workTree = join(dir, spec.path);
      writeGitDir(gitDirs[i]!, core, spec, workTree, store, indexes[n]!);
      if (spec.lfs) {
        const plan: LfsCheckout = {
          ...lfs,
          spec: spec.lfs,
          report: (paths, reason) =>
            lfs.report(
              paths.map((p) => `${spec.path}/${p}`),
              reason,
            ),
        };
        await prepareLfsCheckout(workTree, plan);
        await finishLfsCheckout(workTree, plan);
      }
      const parentConfig = join(spec.parent < 0 ? join(dir, ".git") : gitDirs[spec.parent]!, "config");
      const section = `[submodule ${quoted(spec.name)}]\n\turl = ${quoted(spec.url)}\n\tactive = true\n`;
      registered.set(parentConfig, (registered.get(parentConfig) ?? "") + section);
    }
    for (const [config, text] of registered) appendFileSync(config, text);
  }
}
