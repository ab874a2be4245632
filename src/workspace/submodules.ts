// Finds, on the Paseo side, the submodules a commit records (recursively) and the local repository
// holding each one's recorded commit: `<git dir>/modules/<name>` (a linked worktree's or the common
// one), or the submodule's own `.git` in the work tree. Read-only: nothing is written anywhere.
// A submodule whose commit no local repository has is left out (the host leaves it uninitialised,
// as `git worktree add` does) and named, so the create's progress can say so. Submodules are
// looked up level by level through one union repository (union-repo.ts): a thousand of them cost a
// few git processes, not a few thousand.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { OriginBranch, type SubmoduleOrigin, type SubmoduleSpec } from "../shared/agent-api.js";
import { gitResult, SHA_RE } from "../shared/git-exec.js";
import { isSafeSubmoduleName } from "../shared/submodule-name.js";
import { normaliseRelativePath } from "../shared/relative-path.js";
import { resolveSubmoduleUrl } from "./submodule-url.js";
import { lfsPlan, type LfsPlan } from "./lfs-objects.js";
import { objectsDir, withUnionRepo } from "./union-repo.js";

/** A submodule to ship, and the local git dir its objects are packed from. */
export interface LocalSubmodule {
  spec: SubmoduleSpec;
  gitDir: string;
  /** Its commit's LFS pointers and its local LFS store (null: its tree uses no LFS). */
  lfs: LfsPlan | null;
}

export interface SubmodulePlan {
  modules: LocalSubmodule[];
  /** Paths (from the top level) of submodules left uninitialised: the Paseo side lacks their commit (or git could not resolve their URL). */
  missing: string[];
  /** Every local object directory a shipped submodule's commit may be in: what its objects are packed from (union-repo.ts). */
  objectDirs: string[];
}

/** Nesting bound: deeper chains are left uninitialised rather than walked forever. */
const MAX_DEPTH = 8;

interface Parent {
  /** Where git commands for it run (a work tree or a git dir). */
  cwd: string;
  /** Its git dirs (own and common), where `modules/<name>` may be. */
  gitDirs: string[];
  /** Its work trees on the Paseo side (a linked worktree's and the main one's), where a submodule may keep its own `.git`. */
  workTrees: string[];
  commit: string;
  /** Its remote URL: the base of relative submodule URLs. */
  url: string;
  /** Path from the top level ("" = the superproject). */
  path: string;
  /** Submodule names from the superproject down to it (names its cache). */
  names: string[];
  index: number;
}

const run = (cwd: string, args: string[], okCodes: number[] = [], input?: string) =>
  gitResult(args, { cwd, errorClass: "input", okCodes, timeoutMs: 120_000, ...(input === undefined ? {} : { input }) });

interface Declared {
  name: string;
  url: string;
  update: string;
}

/** `.gitmodules` of `commit`, by path; absent when the commit has none. */
async function declared(cwd: string, commit: string): Promise<Map<string, Declared>> {
  const r = await run(cwd, ["config", "--blob", `${commit}:.gitmodules`, "-z", "--list"], [1, 128]);
  const byName = new Map<string, { path?: string; url?: string; update?: string }>();
  if (r.code === 0) {
    for (const entry of r.stdout.split("\0")) {
      const nl = entry.indexOf("\n");
      const key = nl < 0 ? entry : entry.slice(0, nl);
      const m = /^submodule\.(.+)\.(path|url|update)$/.exec(key);
      if (!m || nl < 0) continue;
      const rec = byName.get(m[1]!) ?? {};
      rec[m[2] as "path" | "url" | "update"] = entry.slice(nl + 1);
      byName.set(m[1]!, rec);
    }
  }
  const byPath = new Map<string, Declared>();
  for (const [name, rec] of byName) {
    if (rec.path && rec.url) byPath.set(rec.path, { name, url: rec.url, update: rec.update ?? "" });
  }
  return byPath;
}

/**
 * A submodule's origin as git would set it, or null where git would not initialise it: `update =
 * none`, a name that leaves `.git/modules/`, a relative URL it cannot resolve, a URL read as an
 * option or holding a line break.
 */
function originOf(parentUrl: string, decl: Declared): string | null {
  if (decl.update === "none" || !isSafeSubmoduleName(decl.name)) return null;
  let url: string;
  try {
    url = resolveSubmoduleUrl(parentUrl, decl.url);
  } catch {
    return null;
  }
  return url.startsWith("-") || /[\0\n]/.test(url) ? null : url;
}

/**
 * Whether a declared path stays inside its repository as written: git refuses to look one up that
 * leaves it (`path = ../../x` fails with "outside repository"), and could not initialise it either.
 */
function insideRepository(path: string): boolean {
  try {
    return path !== "" && normaliseRelativePath(path) === path;
  } catch {
    return false;
  }
}

/**
 * Gitlinks (path, commit) of `commit`'s tree at the paths its .gitmodules declares: a gitlink it
 * does not declare cannot be initialised by git either. Only those paths are read, never the tree.
 */
async function gitlinks(cwd: string, commit: string, paths: string[]): Promise<Array<{ path: string; commit: string }>> {
  const links: Array<{ path: string; commit: string }> = [];
  for (let i = 0; i < paths.length; i += 500) {
    const r = await run(cwd, ["--literal-pathspecs", "ls-tree", "-z", "--full-tree", commit, "--", ...paths.slice(i, i + 500)]);
    for (const entry of r.stdout.split("\0")) {
      // "<mode> <type> <object>\t<path>"
      if (!entry.startsWith("160000 commit ")) continue;
      const tab = entry.indexOf("\t");
      links.push({ path: entry.slice(tab + 1), commit: entry.slice(14, tab) });
    }
  }
  return links;
}

/** The git dir a `.git` file or directory leads to, or null. */
function gitDirAt(dotGit: string): string | null {
  try {
    if (statSync(dotGit).isDirectory()) return dotGit;
    const m = /^gitdir: (.+)$/m.exec(readFileSync(dotGit, "utf8"));
    return m ? resolve(dirname(dotGit), m[1]!.trim()) : null;
  } catch {
    return null;
  }
}

async function hasCommit(gitDir: string, commit: string): Promise<boolean> {
  const r = await run(gitDir, ["cat-file", "-e", `${commit}^{commit}`], [1, 128]);
  return r.code === 0;
}

async function remoteUrl(cwd: string, fallback: string): Promise<string> {
  const branch = await run(cwd, ["symbolic-ref", "--quiet", "--short", "HEAD"], [1, 128]);
  let remote = "origin";
  if (branch.code === 0) {
    const configured = await run(cwd, ["config", `branch.${branch.stdout.trim()}.remote`], [1]);
    if (configured.code === 0 && configured.stdout.trim()) remote = configured.stdout.trim();
  }
  const url = await run(cwd, ["config", `remote.${remote}.url`], [1]);
  return url.code === 0 && url.stdout.trim() ? url.stdout.trim() : fallback;
}

async function gitDirsOf(cwd: string): Promise<string[]> {
  const r = await run(cwd, ["rev-parse", "--absolute-git-dir", "--git-common-dir"]);
  const [own = "", common = ""] = r.stdout.split("\n");
  return [...new Set([own, resolve(cwd, common)].filter(Boolean))];
}

/** Submodules whose LFS pointers and remote-tracking refs are read at once. */
const LOOKUPS_AT_ONCE = 8;

/** `fn` over `items`, `size` at a time, results in order. */
async function inGroups<T, R>(items: T[], size: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let at = 0; at < items.length; at += size)
    out.push(...(await Promise.all(items.slice(at, at + size).map((item, k) => fn(item, at + k)))));
  return out;
}

/** Bound on the remote-tracking branches taken over from one submodule's repository. */
const MAX_BRANCHES = 1000;

/**
 * What a clone of the submodule's URL would leave as its refs, as its local repository (itself such
 * a clone) knows the remote: `refs/remotes/origin/*` commits and the branch origin's HEAD names.
 * Null where it has none (a repository made in place): the host's then has none either.
 */
async function originRefs(gitDir: string): Promise<SubmoduleOrigin | null> {
  const list = await run(gitDir, ["for-each-ref", "--format=%(objectname) %(objecttype) %(refname)", "refs/remotes/origin/"]);
  const branches: SubmoduleOrigin["branches"] = [];
  for (const line of list.stdout.split("\n")) {
    const m = /^([0-9a-f]{40,64}) commit refs\/remotes\/origin\/(.+)$/.exec(line);
    const branch = m && { name: m[2]!, commit: m[1]! };
    // A name the host would refuse is left out (git refuses far fewer; such names are rare).
    if (branch && OriginBranch(branch) && branches.length < MAX_BRANCHES) branches.push(branch);
  }
  if (branches.length === 0) return null;
  const symref = await run(gitDir, ["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"], [1, 128]);
  const target = symref.code === 0 ? symref.stdout.trim().replace(/^refs\/remotes\/origin\//, "") : "";
  return { branches, head: branches.some((b) => b.name === target) ? target : null };
}

/** Cache name of a submodule: the project's key and the names down to it. */
export function submoduleKey(projectKey: string, names: string[]): string {
  return createHash("sha256")
    .update(["submodule", projectKey, ...names].join("\0"), "utf8")
    .digest("hex")
    .slice(0, 32);
}

/** The shallow boundary of a local git dir (its common dir's `shallow` file), read without git. */
function shallowOf(gitDir: string): string[] {
  try {
    return readFileSync(join(dirname(objectsDir(gitDir)), "shallow"), "utf8")
      .split("\n")
      .filter((l) => SHA_RE.test(l));
  } catch {
    return [];
  }
}

/** One gitlink of a parent with its .gitmodules entry: a submodule to look for. */
interface Found {
  parent: Parent;
  decl: Declared;
  commit: string;
  path: string;
  url: string;
  workTrees: string[];
  /** Local git dirs that may hold its commit (those that exist), in the order they are preferred. */
  candidates: string[];
}

/**
 * Which of `found` have their commit in a candidate, and where; and which of those commits hold a
 * .gitmodules. One `cat-file` over all candidates' objects (a union repository) answers for every
 * submodule of a level; only a submodule with two or more candidates asks each in turn.
 */
async function locate(found: Found[]): Promise<Array<{ gitDir: string | null; nested: boolean }>> {
  const dirs = found.flatMap((f) => f.candidates.map(objectsDir));
  return withUnionRepo(dirs, [], async (repo) => {
    const input = found.flatMap((f) => [f.commit, `${f.commit}:.gitmodules`]).join("\n") + "\n";
    const out = (await run(repo, ["cat-file", "--batch-check=%(objecttype)"], [], input)).stdout.split("\n");
    const located: Array<{ gitDir: string | null; nested: boolean }> = [];
    for (const [i, f] of found.entries()) {
      const has = out[2 * i] === "commit";
      let gitDir = has && f.candidates.length === 1 ? f.candidates[0]! : null;
      if (has && f.candidates.length > 1) {
        for (const candidate of f.candidates) {
          if (await hasCommit(candidate, f.commit)) {
            gitDir = candidate;
            break;
          }
        }
      }
      located.push({ gitDir, nested: out[2 * i + 1] === "blob" });
    }
    return located;
  });
}

/**
 * Every submodule `commit` records, recursively, split into those the Paseo side has and the rest.
 * Level by level (parents before their children): a few git processes per level, not per submodule.
 */
export async function planSubmodules(topLevel: string, commit: string, projectKey: string): Promise<SubmodulePlan> {
  const plan: SubmodulePlan = { modules: [], missing: [], objectDirs: [] };
  // Most repositories have none: one git call decides, before anything else is looked up.
  const topDeclared = await declared(topLevel, commit);
  if (topDeclared.size === 0) return plan;
  const gitDirs = await gitDirsOf(topLevel);
  // A linked worktree's submodules may live only in the main worktree (its own `.git` there).
  const common = gitDirs[gitDirs.length - 1]!;
  const main = basename(common) === ".git" ? dirname(common) : null;
  const top: Parent = {
    cwd: topLevel,
    gitDirs,
    workTrees: [...new Set([topLevel, ...(main ? [main] : [])])],
    commit,
    url: await remoteUrl(topLevel, topLevel),
    path: "",
    names: [],
    index: -1,
  };
  let level: Array<{ parent: Parent; byPath: Map<string, Declared> }> = [{ parent: top, byPath: topDeclared }];
  const objectDirs = new Set<string>();
  while (level.length > 0) {
    const found: Found[] = [];
    for (const { parent, byPath } of level) {
      const fromTop = (path: string) => (parent.path ? `${parent.path}/${path}` : path);
      // Skipped with a progress line, as an unusable submodule is, instead of failing the create.
      for (const path of byPath.keys()) if (!insideRepository(path)) plan.missing.push(fromTop(path));
      const paths = [...byPath.keys()].filter(insideRepository);
      if (paths.length === 0) continue;
      for (const link of await gitlinks(parent.cwd, parent.commit, paths)) {
        const path = fromTop(link.path);
        const decl = byPath.get(link.path);
        if (!decl) continue;
        const url = originOf(parent.url, decl);
        if (url === null || parent.names.length >= MAX_DEPTH) {
          plan.missing.push(path);
          continue;
        }
        const workTrees = parent.workTrees.map((w) => join(w, link.path)).filter((w) => existsSync(join(w, ".git")));
        const candidates = [
          ...parent.gitDirs.map((d) => join(d, "modules", decl.name)),
          ...workTrees.map((w) => gitDirAt(join(w, ".git"))),
        ].filter((d): d is string => d !== null && existsSync(d));
        found.push({ parent, decl, commit: link.commit, path, url, workTrees, candidates: [...new Set(candidates)] });
      }
    }
    const located = found.length > 0 ? await locate(found) : [];
    // Its LFS content comes from its own local store, as the superproject's does; its
    // remote-tracking refs from its own repository (a few at a time: a level may hold thousands).
    const extras = await inGroups(located, LOOKUPS_AT_ONCE, async ({ gitDir }, i) => {
      if (!gitDir) return { lfs: null, origin: null };
      const [lfs, origin] = await Promise.all([lfsPlan(gitDir, found[i]!.commit), originRefs(gitDir)]);
      return { lfs, origin };
    });
    const next: typeof level = [];
    for (const [i, f] of found.entries()) {
      const { gitDir, nested } = located[i]!;
      if (!gitDir) {
        plan.missing.push(f.path);
        continue;
      }
      for (const c of f.candidates) objectDirs.add(objectsDir(c));
      const names = [...f.parent.names, f.decl.name];
      const { lfs, origin } = extras[i]!;
      const spec: SubmoduleSpec = {
        key: submoduleKey(projectKey, names),
        name: f.decl.name,
        path: f.path,
        parent: f.parent.index,
        commit: f.commit,
        url: f.url,
        shallow: shallowOf(gitDir),
        ...(lfs ? { lfs: lfs.spec } : {}),
        ...(origin ? { origin } : {}),
      };
      plan.modules.push({ spec, gitDir, lfs });
      if (!nested) continue;
      const parent: Parent = {
        cwd: gitDir,
        gitDirs: [gitDir],
        workTrees: f.workTrees,
        commit: f.commit,
        url: f.url,
        path: f.path,
        names,
        index: plan.modules.length - 1,
      };
      const byPath = await declared(gitDir, f.commit);
      if (byPath.size > 0) next.push({ parent, byPath });
    }
    level = next;
  }
  plan.objectDirs = [...objectDirs];
  return plan;
}
