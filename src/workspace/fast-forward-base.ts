// Runtime side of the extra `merge-to-base` operation (docs/contract.md#extras; our choice of semantics):
// bring the workspace's committed work back to the Paseo-host repository it was created from and
// fast-forward the recorded base branch to it. Never a real merge: if the base moved on, refuse and
// let the user merge or rebase inside the workspace. Uncommitted workspace changes are not taken.
import { RuntimeError } from "../shared/errors.js";
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import type { RemoteHost } from "../transport/host.js";
import { gitResult, knownCommits, SHA_RE } from "../shared/git-exec.js";
import { verifyIntegration } from "../mirror/seal.js";
import { importPack } from "../mirror/import-pack.js";

async function localGit(repo: string, args: string[], okCodes: number[] = []): Promise<{ code: number; stdout: string }> {
  return gitResult(args, { cwd: repo, errorClass: "input", okCodes, timeoutMs: 60_000 });
}

/** Returns the absolute Paseo-host path Paseo should refresh (localIntegrationTarget). */
export async function mergeToBase(host: RemoteHost, owner: string, workspaceId: string): Promise<string> {
  const info = await host.call("workspace.merge-info", { workspaceId, owner });
  // Everything the host says is checked before anything local is read or written: the target
  // against this machine's seal, the commits as full object ids (never options or ref names).
  if (!SHA_RE.test(String(info.head)) || !SHA_RE.test(String(info.createdFrom))) {
    throw new RuntimeError("remote", `merge-to-base refused: the host reported malformed commit ids for workspace ${workspaceId}`);
  }
  const { localPath: repo, baseBranch } = verifyIntegration(info.integration, { owner, workspaceId, commit: info.createdFrom });
  const baseRef = `refs/heads/${baseBranch}`;
  const tip = await localGit(repo, ["rev-parse", "--verify", "--quiet", `${baseRef}^{commit}`], [1]);
  const baseTip = tip.stdout.trim();
  if (tip.code !== 0 || !SHA_RE.test(baseTip))
    throw new RuntimeError("input", `merge-to-base: branch ${baseBranch} no longer exists in ${repo}`);
  if ((await knownCommits(repo, [info.head], "input")).length === 0) {
    const common = (await localGit(repo, ["rev-parse", "--git-common-dir"])).stdout.trim();
    await importPack(host, realpathSync(resolve(repo, common)), {
      workspaceId,
      owner,
      wants: [info.head],
      haves: [info.createdFrom, baseTip],
    });
  }
  if (baseTip === info.head) return repo;
  const ff = await localGit(repo, ["merge-base", "--is-ancestor", baseTip, info.head], [1]);
  if (ff.code !== 0) {
    throw new RuntimeError(
      "input",
      `merge-to-base needs a fast-forward: ${baseBranch} in ${repo} has commits the workspace lacks; merge or rebase them in the workspace first`,
    );
  }
  const current = await localGit(repo, ["symbolic-ref", "--quiet", "HEAD"], [1]);
  if (current.code === 0 && current.stdout.trim() === baseRef) {
    // The base is checked out there: move the working tree too (refuses to clobber local edits).
    await localGit(repo, ["merge", "--ff-only", "--quiet", info.head]);
  } else {
    await localGit(repo, ["update-ref", baseRef, info.head, baseTip]);
  }
  return repo;
}
