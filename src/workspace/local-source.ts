// Resolves, on the Paseo host, which commit and branch a directory-source workspace materializes,
// per placement kind. Uses read-only git plumbing only: the local repository gains no refs, no
// config and no files. Uncommitted and untracked content is dropped by design (only commits ship).
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import { RuntimeError } from "../shared/errors.js";
import type { PlacementIntent, ResolvedWorktreeSource } from "../contract/schemas.js";
import { gitResult, SHA_RE } from "../shared/git-exec.js";
import type { TrackFrom } from "./local-remotes.js";

export interface LocalResolution {
  /** Canonical path of the repository's top level. */
  topLevel: string;
  /** The repository's (common) git directory, absolute and canonical. */
  gitDir: string;
  commit: string;
  /** "" = detached checkout. */
  branch: string;
  /** Path of the source directory inside the repository ("" when it is the top level). */
  prefix: string;
  /** Local branch merge-to-base integrates into ("" = none, e.g. a detached source). */
  baseBranch: string;
  /** Whose upstream the workspace's branch takes: the same local branch's, or none for a new branch. */
  trackFrom: TrackFrom;
}

async function localGit(repo: string, args: string[], okCodes: number[] = []): Promise<{ code: number; stdout: string }> {
  return gitResult(args, { cwd: repo, errorClass: "input", okCodes, timeoutMs: 60_000 });
}

async function commitOf(repo: string, ref: string): Promise<string | null> {
  if (ref === "" || ref.startsWith("-")) return null;
  const r = await localGit(repo, ["rev-parse", "--verify", "--quiet", `${ref}^{commit}`], [1, 128]);
  const sha = r.stdout.trim();
  return r.code === 0 && SHA_RE.test(sha) ? sha : null;
}

async function firstCommit(repo: string, refs: string[]): Promise<string | null> {
  for (const ref of refs) {
    const sha = await commitOf(repo, ref);
    if (sha) return sha;
  }
  return null;
}

async function requireCommit(repo: string, ref: string, what: string): Promise<string> {
  const sha = await commitOf(repo, ref);
  if (!sha) throw new RuntimeError("input", `Cannot resolve ${what} "${ref}" in the project repository ${repo}`);
  return sha;
}

async function validBranchName(repo: string, name: string): Promise<string> {
  const r = name.startsWith("-") ? { code: 1 } : await localGit(repo, ["check-ref-format", "--branch", name], [1, 128]);
  if (r.code !== 0) throw new RuntimeError("input", `Invalid branch name: ${name}`);
  return name;
}

async function isLocalBranch(repo: string, name: string): Promise<boolean> {
  if (name === "" || name.startsWith("-")) return false;
  const r = await localGit(repo, ["show-ref", "--verify", "--quiet", `refs/heads/${name}`], [1]);
  return r.code === 0;
}

function stripHeads(ref: string): string {
  return ref.replace(/^refs\/heads\//, "");
}

interface Resolved {
  commit: string;
  branch: string;
  /** Candidate base branch; kept only when it is a local branch. */
  base: string;
  trackFrom: TrackFrom;
}

/** The branch as it is here: its own upstream when it is a local branch (else a new branch: none). */
async function sameBranch(repo: string, branch: string): Promise<TrackFrom> {
  return (await isLocalBranch(repo, branch)) ? { kind: "local", branch } : null;
}

async function resolveWorktreeSource(repo: string, source: ResolvedWorktreeSource): Promise<Resolved> {
  switch (source.kind) {
    case "branch-off": {
      const base = stripHeads(source.baseBranch);
      return {
        commit: await requireCommit(repo, source.baseBranch, "base branch"),
        branch: await validBranchName(repo, source.branchName),
        base,
        trackFrom: null,
      };
    }
    case "checkout-branch": {
      const name = stripHeads(source.branchName);
      const commit = await firstCommit(repo, [`refs/heads/${name}`, `refs/remotes/origin/${name}`]);
      if (!commit) throw new RuntimeError("input", `Cannot resolve branch "${name}" from local refs of ${repo}; fetch it first`);
      // Made from origin/<name> as `git switch <name>` makes it: tracking that.
      const trackFrom = (await sameBranch(repo, name)) ?? { kind: "remote", remote: "origin", branch: name };
      return { commit, branch: await validBranchName(repo, name), base: name, trackFrom };
    }
    default: {
      const head = stripHeads(source.headRef);
      const local = source.localBranchName ? stripHeads(source.localBranchName) : head;
      const candidates = [`refs/heads/${local}`, `refs/heads/${head}`];
      for (const r of source.checkoutRefs ?? []) {
        const remoteRef = r.remoteRef.replace(/^refs\/(heads|remotes\/[^/]+)\//, "");
        candidates.push(`refs/remotes/${r.remoteName ?? "origin"}/${remoteRef}`);
        if (r.remoteRef.startsWith("refs/")) candidates.push(r.remoteRef);
      }
      candidates.push(`refs/remotes/origin/${head}`);
      const commit = await firstCommit(repo, candidates);
      if (!commit)
        throw new RuntimeError(
          "input",
          `Cannot resolve change request head "${source.headRef}" from local refs of ${repo}; fetch it first`,
        );
      const branch = await validBranchName(repo, local);
      return { commit, branch, base: stripHeads(source.baseRefName), trackFrom: await sameBranch(repo, branch) };
    }
  }
}

/** Resolves the commit and branch to materialize for a directory source and placement. */
export async function resolveLocalSource(path: string, placement: PlacementIntent): Promise<LocalResolution> {
  let repo: string;
  try {
    repo = realpathSync(path);
  } catch {
    throw new RuntimeError("input", `Project directory does not exist: ${path}`);
  }
  // Other failures (e.g. git's dubious-ownership refusal) keep git's own one-line reason.
  const top = await localGit(repo, ["rev-parse", "--show-toplevel", "--show-prefix", "--git-common-dir"]).catch((err: unknown) => {
    if (err instanceof RuntimeError && err.code === "git-not-a-repository") {
      throw new RuntimeError("input", `Project directory is not a git repository: ${path}`);
    }
    throw err;
  });
  const [topLevel = repo, prefix = "", commonDir = ".git"] = top.stdout.split("\n");
  // Where refs live (the common directory of a linked worktree): the work comes back there.
  const gitDir = realpathSync(resolve(repo, commonDir));
  let commit: string;
  let branch: string;
  let base: string;
  let trackFrom: TrackFrom = null;
  switch (placement.kind) {
    case "existing": {
      const c = await commitOf(repo, "HEAD");
      if (!c) throw new RuntimeError("input", `The project repository has no commit to materialize: ${path}`);
      const sym = await localGit(repo, ["symbolic-ref", "--quiet", "--short", "HEAD"], [1]);
      commit = c;
      branch = sym.code === 0 ? sym.stdout.trim() : "";
      base = branch;
      trackFrom = branch ? { kind: "local", branch } : null;
      break;
    }
    case "branch":
      commit = await requireCommit(repo, placement.baseRef, "base ref");
      branch = await validBranchName(repo, placement.branchName);
      base = stripHeads(placement.baseRef);
      break;
    case "checkout":
      commit = await requireCommit(repo, placement.ref, "ref");
      branch = (await isLocalBranch(repo, stripHeads(placement.ref))) ? stripHeads(placement.ref) : "";
      base = branch;
      trackFrom = branch ? { kind: "local", branch } : null;
      break;
    case "resolved-worktree":
      ({ commit, branch, base, trackFrom } = await resolveWorktreeSource(repo, placement.source));
      break;
  }
  const baseBranch = (await isLocalBranch(repo, base)) ? base : "";
  return { topLevel, gitDir, commit, branch, prefix: prefix.replace(/\/$/, ""), baseBranch, trackFrom };
}
