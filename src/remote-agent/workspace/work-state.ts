// What a workspace's checkout holds that the Paseo side may not: its branches, its HEAD and, when
// asked (before the workspace is removed), its uncommitted work recorded as one commit on HEAD, as
// `git stash create` does but with untracked files that are not ignored. The runtime brings this
// back (src/mirror/); the token names the state so that destroy can tell whether what it is about
// to delete is exactly what was brought back (otherwise it archives first: work-archive.ts).
import { copyFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { git, gitResult, SHA_RE } from "../../shared/git-exec.js";
import type { WorkState } from "../../shared/agent-api.js";
import type { WorkspaceLayout } from "../layout.js";
import type { WorkspaceManifest } from "./manifest.js";

/** Where the uncommitted-work commit is kept in the checkout (packable, and archived with it). */
export const UNCOMMITTED_REF = "refs/paseo-ssh/uncommitted";
const SNAPSHOT_TIMEOUT_MS = 10 * 60_000;
/**
 * The snapshot stores file content as it is: Git LFS's clean filter would put it in the host's LFS
 * store, where nothing brings it back.
 */
const RAW_CONTENT = ["-c", "filter.lfs.clean=cat", "-c", "filter.lfs.process=", "-c", "filter.lfs.required=false"];
const IDENTITY = {
  GIT_AUTHOR_NAME: "paseo-ssh-runtime",
  GIT_AUTHOR_EMAIL: "paseo-ssh-runtime@localhost",
  GIT_COMMITTER_NAME: "paseo-ssh-runtime",
  GIT_COMMITTER_EMAIL: "paseo-ssh-runtime@localhost",
};

/** The checkout's branches (refs/heads/*) with their commits: one git process. */
async function branches(checkout: string): Promise<{ name: string; commit: string }[]> {
  const out = await git(["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"], { cwd: checkout });
  const list: { name: string; commit: string }[] = [];
  for (const line of out.split("\n")) {
    const at = line.indexOf(" ");
    if (at < 0) continue;
    list.push({ commit: line.slice(0, at), name: line.slice(at + 1).replace(/^refs\/heads\//, "") });
  }
  return list.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** HEAD read from its file: the branch it names, or the commit of a detached HEAD. */
function readHead(checkout: string): { ref: string | null; commit: string | null } {
  const text = readFileSync(join(checkout, ".git", "HEAD"), "utf8").trim();
  if (text.startsWith("ref: ")) return { ref: text.slice(5).trim(), commit: null };
  return { ref: null, commit: SHA_RE.test(text) ? text : null };
}

/** The uncommitted work as a commit on `head` (null when the tree equals HEAD's). */
async function snapshot(layout: WorkspaceLayout, head: string, workspaceId: string): Promise<{ commit: string; tree: string } | null> {
  const checkout = layout.checkout;
  // An index of its own, kept beside the checkout (removed with it): started as a copy of the real
  // one, so unchanged files are not hashed again, and reused by the next snapshot (a destroy makes
  // two: the one it brings back and the host's check before deleting). The real index is untouched.
  const index = join(layout.dir, ".work-index");
  if (!existsSync(index)) {
    try {
      copyFileSync(join(checkout, ".git", "index"), index);
    } catch {
      // no index yet: git builds one from scratch
    }
  }
  const env = { GIT_INDEX_FILE: index, ...IDENTITY };
  await git([...RAW_CONTENT, "add", "--all", "--", "."], { cwd: checkout, env, timeoutMs: SNAPSHOT_TIMEOUT_MS, background: true });
  const tree = (await git(["write-tree"], { cwd: checkout, env })).trim();
  const headTree = (await git(["rev-parse", `${head}^{tree}`], { cwd: checkout })).trim();
  if (tree === headTree) return null;
  const message = `paseo-ssh-runtime: uncommitted work of workspace ${workspaceId}\n\nModified and untracked files (not ignored) as they were when the workspace was removed.\n`;
  const commit = (await git(["commit-tree", tree, "-p", head], { cwd: checkout, env, input: message })).trim();
  await git(["update-ref", UNCOMMITTED_REF, commit], { cwd: checkout });
  return { commit, tree };
}

export function workToken(s: Pick<WorkState, "head" | "headRef" | "branches" | "uncommitted">): string {
  const material = JSON.stringify([s.head, s.headRef, s.branches.map((b) => [b.name, b.commit]), s.uncommitted?.tree ?? null]);
  return createHash("sha256").update(material, "utf8").digest("hex");
}

/** The workspace's work now; `withSnapshot`: record uncommitted work first (before a removal). */
export async function readWorkState(layout: WorkspaceLayout, manifest: WorkspaceManifest, withSnapshot: boolean): Promise<WorkState> {
  const checkout = layout.checkout;
  const [list, h] = [await branches(checkout), readHead(checkout)];
  const head = h.ref ? (list.find((b) => `refs/heads/${b.name}` === h.ref)?.commit ?? null) : h.commit;
  const uncommitted = withSnapshot && head ? await snapshot(layout, head, manifest.workspaceId) : null;
  const state = {
    workspaceId: manifest.workspaceId,
    owner: manifest.owner,
    createdFrom: manifest.commit,
    workHome: manifest.workHome ?? null,
    head,
    headRef: h.ref,
    branches: list,
    uncommitted,
  };
  return { ...state, token: workToken(state) };
}

/** True when the state holds commits the workspace was not created from, or uncommitted work. */
export async function holdsWork(checkout: string, state: WorkState): Promise<boolean> {
  if (state.uncommitted) return true;
  const tips = [state.head, ...state.branches.map((b) => b.commit)].filter((c): c is string => c !== null && SHA_RE.test(c));
  if (tips.length === 0) return false;
  const base = SHA_RE.test(state.createdFrom) ? [`^${state.createdFrom}`] : [];
  const r = await gitResult(["rev-list", "-n", "1", "--stdin"], {
    cwd: checkout,
    input: [...tips, ...base].join("\n") + "\n",
    okCodes: [128],
  });
  // A checkout git cannot walk may hold anything: keep it.
  return r.code !== 0 || r.stdout.trim() !== "";
}
