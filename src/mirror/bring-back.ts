// Brings a workspace's work (src/shared/agent-api.ts WorkState) into the Paseo side repository it
// was created from: the objects that are missing there (a thin pack, verified in quarantine:
// import-pack.ts), then refs. Everything lands in the workspace's own namespace
// (`refs/paseo-ssh/<workspace>/head`, `heads/<branch>`, `uncommitted`); a branch the workspace
// made that does not exist locally also appears as a local branch, exactly as Paseo's Worktree
// runtime leaves one, and afterwards moves only by compare-and-swap from the value written here
// last (`local-branch/<branch>` remembers it), so a branch the user moved, deleted or checked out
// is never overridden. Local HEAD, index, working tree, config and every other branch are never
// touched. Called by destroy, release-backing and reconcile before a workspace is removed, and by
// the broker whenever the host reports that a workspace's refs moved (live mirror).
import { RuntimeError } from "../shared/errors.js";
import { gitResult, knownCommits, SHA_RE } from "../shared/git-exec.js";
import type { WorkState } from "../shared/agent-api.js";
import type { RemoteHost } from "../transport/host.js";
import { verifyWorkHome } from "./seal.js";
import { isSafeBranchName, workNamespace } from "./ref-names.js";
import { importPack } from "./import-pack.js";

/** Branches a workspace may bring back at most (a flood is refused with a clear line). */
export const MAX_BRANCHES = 1000;
const GIT_TIMEOUT_MS = 120_000;

export interface BringBackResult {
  gitDir: string;
  namespace: string;
  /** Bytes of the pack received (0 when every commit was already there). */
  bytes: number;
  /** What happened to each branch's local counterpart. */
  branches: { name: string; local: "created" | "moved" | "unchanged" | "left" }[];
}

function refuse(state: WorkState, why: string): RuntimeError {
  return new RuntimeError(
    "remote",
    `the host's report of workspace ${state.workspaceId}'s work was refused: ${why}; nothing local was changed`,
  );
}

/** Checks every name and id the host reported before any of it is used. */
function checkState(state: WorkState): void {
  const sha = (v: string | null | undefined, what: string) => {
    if (v !== null && v !== undefined && !SHA_RE.test(v)) throw refuse(state, `${what} is not a commit id`);
  };
  sha(state.createdFrom, "the commit it was created from");
  sha(state.head, "HEAD");
  sha(state.uncommitted?.commit, "the uncommitted work");
  if (state.branches.length > MAX_BRANCHES) throw refuse(state, `it names ${state.branches.length} branches, more than ${MAX_BRANCHES}`);
  const seen = new Set<string>();
  for (const b of state.branches) {
    if (!isSafeBranchName(b.name)) throw refuse(state, `branch name ${JSON.stringify(b.name.slice(0, 80))} is not a valid branch name`);
    if (seen.has(b.name)) throw refuse(state, `branch ${b.name} is named twice`);
    seen.add(b.name);
    sha(b.commit, `branch ${b.name}`);
  }
  if (state.headRef !== null && !(state.headRef.startsWith("refs/heads/") && isSafeBranchName(state.headRef.slice(11)))) {
    throw refuse(state, "HEAD names something other than a branch");
  }
}

async function git(gitDir: string, args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return gitResult(["--git-dir", gitDir, ...args], {
    errorClass: "input",
    timeoutMs: GIT_TIMEOUT_MS,
    okCodes: [1, 128],
    ...(input !== undefined ? { input } : {}),
  });
}

/** for-each-ref's `%(objectname) %(refname)` lines as a map. */
function parseRefs(stdout: string): Map<string, string> {
  const refs = new Map<string, string>();
  for (const line of stdout.split("\n")) {
    const at = line.indexOf(" ");
    if (at > 0) refs.set(line.slice(at + 1), line.slice(0, at));
  }
  return refs;
}

/** Branches checked out in any worktree of the repository: moving one would leave its files stale. */
async function checkedOut(gitDir: string): Promise<Set<string>> {
  const r = await git(gitDir, ["worktree", "list", "--porcelain"]);
  const refs = new Set<string>();
  for (const line of r.stdout.split("\n")) if (line.startsWith("branch ")) refs.add(line.slice(7).trim());
  return refs;
}

/** One ref transaction: all of it or none (update-ref --stdin); false when a compare failed. */
async function transact(gitDir: string, lines: string[]): Promise<boolean> {
  if (lines.length === 0) return true;
  const r = await git(gitDir, ["update-ref", "--stdin"], lines.join("\n") + "\n");
  return r.code === 0;
}

/** The repository the work goes to, if this machine sealed the host's record of it for this workspace. */
export function sealedHome(state: WorkState): string | null {
  return verifyWorkHome(state.workHome, { owner: state.owner, workspaceId: state.workspaceId, commit: state.createdFrom });
}

type Landing = BringBackResult["branches"][number]["local"];

/**
 * The local counterpart of one of the workspace's branches: created when the workspace made it
 * and no branch of that name exists, moved by compare-and-swap from the value written last, left
 * alone once the user moved or deleted it. Null when a compare failed (someone wrote it meanwhile).
 */
async function landBranch(
  gitDir: string,
  local: string,
  memo: string,
  commit: string,
  current: string | undefined,
  written: string | undefined,
  busy: () => Promise<Set<string>>,
): Promise<Landing | null> {
  if (written === undefined) {
    if (current !== undefined) return "left";
    return (await transact(gitDir, [`create ${local} ${commit}`, `create ${memo} ${commit}`])) ? "created" : null;
  }
  if (current !== written) return "left";
  if (current === commit) return "unchanged";
  if ((await busy()).has(local)) return "left";
  return (await transact(gitDir, [`update ${local} ${commit} ${written}`, `update ${memo} ${commit} ${written}`])) ? "moved" : null;
}

export async function bringBack(host: RemoteHost, state: WorkState, opts: { maxBytes?: number } = {}): Promise<BringBackResult> {
  const gitDir = sealedHome(state);
  if (!gitDir) {
    throw new RuntimeError(
      "remote",
      `the host's record of where workspace ${state.workspaceId}'s work goes was not sealed by this machine for it (altered on the host, or created elsewhere or by an older version); nothing local was changed`,
    );
  }
  checkState(state);
  const ns = workNamespace(state.workspaceId);
  // One read of every ref involved; it doubles as the check that the repository is still there.
  const listed = await git(gitDir, ["for-each-ref", "--format=%(objectname) %(refname)", `${ns}/`, "refs/heads/"]);
  if (listed.code !== 0) {
    throw new RuntimeError(
      "input",
      `the repository workspace ${state.workspaceId} was created from (${gitDir}) is gone or is not a git repository`,
    );
  }
  const refs = parseRefs(listed.stdout);
  const wants = [...new Set([state.head, ...state.branches.map((b) => b.commit), state.uncommitted?.commit ?? null])].filter(
    (c): c is string => c !== null,
  );
  const present = new Set(await knownCommits(gitDir, [...wants, state.createdFrom], "input"));
  // A workspace with nothing of its own yet (every tip is the commit it was created from, which is
  // here, and every branch exists locally) leaves no trace: no namespace until there is work.
  const untouched =
    present.has(state.createdFrom) &&
    wants.every((w) => w === state.createdFrom) &&
    state.branches.every((b) => refs.has(`refs/heads/${b.name}`)) &&
    ![...refs.keys()].some((r) => r.startsWith(`${ns}/`));
  if (untouched)
    return { gitDir, namespace: ns, bytes: 0, branches: state.branches.map((b) => ({ name: b.name, local: "left" as const })) };
  const missing = wants.filter((w) => !present.has(w));
  let bytes = 0;
  if (missing.length > 0) {
    // What the repository has of this workspace's history: the pack leaves out what they reach.
    const haves = [
      ...new Set([
        ...(present.has(state.createdFrom) ? [state.createdFrom] : []),
        ...[...refs].filter(([r]) => r.startsWith(`${ns}/`)).map(([, v]) => v),
      ]),
    ];
    // importPack's connectivity walk refuses a pack that does not complete every wanted commit.
    bytes = await importPack(host, gitDir, { workspaceId: state.workspaceId, owner: state.owner, wants: missing, haves }, opts.maxBytes);
  }
  // The namespace mirrors the workspace exactly: its HEAD, each branch, the uncommitted work.
  const lines: string[] = [];
  const set = (ref: string, value: string) => {
    if (refs.get(ref) !== value) lines.push(`update ${ref} ${value}`);
  };
  if (state.head) set(`${ns}/head`, state.head);
  for (const b of state.branches) set(`${ns}/heads/${b.name}`, b.commit);
  if (state.uncommitted) set(`${ns}/uncommitted`, state.uncommitted.commit);
  const names = new Set(state.branches.map((b) => b.name));
  for (const ref of refs.keys()) {
    if (ref.startsWith(`${ns}/heads/`) && !names.has(ref.slice(`${ns}/heads/`.length))) lines.push(`delete ${ref}`);
  }
  if (!(await transact(gitDir, lines))) throw refuse(state, "its refs could not be written in the repository");
  // Read only when a branch is to be moved (a git process saved on most runs).
  let busy: Set<string> | null = null;
  const branches: BringBackResult["branches"] = [];
  for (const b of state.branches) {
    const local = `refs/heads/${b.name}`;
    const memo = `${ns}/local-branch/${b.name}`;
    let outcome = await landBranch(
      gitDir,
      local,
      memo,
      b.commit,
      refs.get(local),
      refs.get(memo),
      async () => (busy ??= await checkedOut(gitDir)),
    );
    if (outcome === null) {
      // Another run (the live mirror, a destroy) wrote it in between: judged again as it is now.
      const again = parseRefs((await git(gitDir, ["for-each-ref", "--format=%(objectname) %(refname)", local, memo])).stdout);
      outcome = again.get(local) === b.commit && again.get(memo) === b.commit ? "unchanged" : "left";
    }
    branches.push({ name: b.name, local: outcome });
  }
  return { gitDir, namespace: ns, bytes, branches };
}
