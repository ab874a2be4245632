// Shallow sources on the Paseo side: the boundary a repository's history is cut at (its `shallow`
// file, as `git clone --depth` leaves it) travels with the create so the workspace keeps it, and a
// cache on the host that is cut where the local repository is not gets the history below its cut.
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { gitResult, knownCommits, SHA_RE } from "../shared/git-exec.js";

/** Commits whose parents the repository at `cwd` (a work tree or a git dir) lacks: its shallow boundary. */
export async function localShallow(cwd: string): Promise<string[]> {
  const r = await gitResult(["rev-parse", "--git-path", "shallow"], { cwd, errorClass: "input" });
  const text = await readFile(resolve(cwd, r.stdout.trim()), "utf8").catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return "";
    throw err;
  });
  return text.split("\n").filter((l) => SHA_RE.test(l));
}

/**
 * Extra pack-objects input for a cache whose history is cut at `hostBoundary`: each such commit is
 * treated as parentless (`--shallow`, as upload-pack does for a shallow client), so the host's
 * haves no longer claim what lies below it, and where this repository has what lies below (it is
 * not cut there itself) and one of `commits` reaches it, its parents are asked for too.
 */
export async function deepeningRevs(repo: string, commits: string[], hostBoundary: string[], boundary: string[]): Promise<string[]> {
  const known = await knownCommits(repo, hostBoundary, "input");
  const lines = known.map((c) => `--shallow ${c}`);
  for (const cut of known.filter((c) => !boundary.includes(c))) {
    for (const commit of commits) {
      const reached = await gitResult(["merge-base", "--is-ancestor", cut, commit], { cwd: repo, errorClass: "input", okCodes: [1] });
      if (reached.code !== 0) continue;
      const parents = await gitResult(["rev-parse", `${cut}^@`], { cwd: repo, errorClass: "input" });
      lines.push(...parents.stdout.split("\n").filter((l) => SHA_RE.test(l)));
      break;
    }
  }
  return lines;
}
