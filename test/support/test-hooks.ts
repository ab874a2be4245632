// Turns on the agent's test-only delays (src/remote-agent/test-hooks.ts) for one workspace or one
// exec by writing `<root>/test-hooks.json` directly on the host (seen from the inside through
// host-view.ts: this machine, or the compose container), and nothing the runtime sends can switch
// them on.
import { chownSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TEST_HOOKS_FILE } from "../../src/remote-agent/test-hooks.js";
import { rig } from "../rig/rig.js";
import { requireView } from "./host-view.js";

export interface WorkspaceHooks {
  beforeClaimMs?: number;
  afterClaimMs?: number;
}

export interface ExecHooks {
  delayIdentityMs?: number;
  /** Where a PTY exec looks for python3/script/stty ("" = nowhere: the sshd pty fallback). */
  terminalSearchPath?: string;
}

function write(root: string, section: "workspaces" | "execs" | "host", id: string, hooks: object): void {
  if (!root.startsWith("/")) throw new Error(`test hooks need an absolute root, got ${root}`);
  const view = requireView();
  const here = view.path(root);
  if (!existsSync(here)) {
    // Created for the agent's user, as its first operation would have.
    mkdirSync(here, { recursive: true, mode: 0o700 });
    const { uid, gid } = view.idsOf(rig().user);
    chownSync(here, uid, gid);
  }
  const path = join(here, TEST_HOOKS_FILE);
  const all = existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as Record<string, Record<string, object>>) : {};
  all[section] = { ...all[section], [id]: hooks };
  writeFileSync(`${path}.tmp`, JSON.stringify(all), { mode: 0o644 });
  renameSync(`${path}.tmp`, path);
}

/**
 * Delays around the claim of `workspaceId`'s directory during create. A create waiting in one
 * goes on as soon as it is withdrawn (releaseWorkspaceHooks): hold long, act, then release.
 */
export function setWorkspaceHooks(root: string, workspaceId: string, hooks: WorkspaceHooks): void {
  write(root, "workspaces", workspaceId, hooks);
}

/** Withdraws `workspaceId`'s delays: a create waiting in one goes on now. */
export function releaseWorkspaceHooks(root: string, workspaceId: string): void {
  write(root, "workspaces", workspaceId, {});
}

/** Delays publishing the identity (`started`) of exec `execId`; how its terminal is owned. */
export function setExecHooks(root: string, execId: string, hooks: ExecHooks): void {
  write(root, "execs", execId, hooks);
}

export interface HostGitHooks {
  /** The PATH the agent finds git and git-lfs on for checkouts and facts (a dir with only git hides git-lfs). */
  searchPath?: string;
  /** How long a workspace's `git checkout` may take. */
  checkoutTimeoutMs?: number;
  /** Holds a create before `git lfs checkout` (while `<root>/test-hooks.lfs-held` exists) until withdrawn. */
  lfsCheckoutHoldMs?: number;
}

/** Replaces the host's git hooks ({} withdraws them). */
export function setHostGit(root: string, hooks: HostGitHooks): void {
  write(root, "host", "git", hooks);
}

export function setHostGitSearchPath(root: string, searchPath: string): void {
  setHostGit(root, { searchPath });
}

/** The host daemon refuses the first `n` client-gone notices it receives, unapplied. */
export function setDaemonDropsClientGone(root: string, n: number): void {
  write(root, "host", "daemon", { dropClientGone: n });
}

/**
 * The host daemon publishes these notices (key → payload; {} withdraws them all) of kind "test",
 * or of `kind`, unchecked: a host that sends what the broker must not take.
 */
export function setDaemonTestNotices(root: string, notices: Record<string, Record<string, unknown>>, kind?: string): void {
  write(root, "host", "daemon", { notices, ...(kind ? { noticeKind: kind } : {}) });
}
