// The Paseo side's ssh-agent, for git in the workspaces that opted in (runtime option forwardAgent)
// and nothing else. sshd gives an agent socket only to the session that asked for forwarding: the
// broker's `agent-hold` session, which registers it under `<root>/run/ssh-agent/` and points each
// opted-in workspace's `<ws>/ssh-agent/agent.sock` (a symlink in a 0700 directory of the
// workspace, gone with it) at it, again after every reconnect. git reaches it through the
// checkout's own `core.sshCommand`, which names the link relative to its directory (a socket
// path is limited to 108 bytes, a workspace path is often longer): no workload gets
// SSH_AUTH_SOCK, and with the link down the link dangles, so ssh fails at once with its own error.
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { git } from "../../shared/git-exec.js";
import { readProcStat } from "../../shared/proc-stat.js";
import { rootLayout, type WorkspaceLayout, WORKSPACE_PREFIX } from "../layout.js";

const LINK = "agent.sock";

/** Where a workspace's forwarded agent is reached: a symlink in its own 0700 directory. */
export function workspaceAgentDir(layout: WorkspaceLayout): string {
  return join(layout.dir, "ssh-agent");
}

function registrations(root: string): string {
  return join(rootLayout(root).runBase, "ssh-agent");
}

function isSocket(path: string): boolean {
  try {
    return statSync(path).isSocket();
  } catch {
    return false;
  }
}

/** Replaces `path` with a symlink to `target` in one rename (no moment without a link). */
function pointAt(path: string, target: string): void {
  const tmp = `${path}.${randomBytes(4).toString("hex")}`;
  symlinkSync(target, tmp);
  renameSync(tmp, path);
}

/** The agent socket of a live hold session (its process still runs), newest first; null: none. */
export function currentAgentSocket(root: string): string | null {
  const dir = registrations(root);
  if (!existsSync(dir)) return null;
  const live = readdirSync(dir)
    .map((name) => {
      const m = /^(\d+)-(\d+)\.sock$/.exec(name);
      if (!m) return null;
      const path = join(dir, name);
      const alive = readProcStat(Number(m[1]))?.startTime === m[2];
      if (!alive || !isSocket(path)) return null;
      return { target: readlinkSync(path), at: lstatSync(path).mtimeMs };
    })
    .filter((r): r is { target: string; at: number } => r !== null)
    .sort((a, b) => b.at - a.at);
  return live[0]?.target ?? null;
}

/** Points every opted-in workspace of the root at `target` (a dangling link when there is none). */
function pointWorkspaces(root: string, target: string): void {
  const base = rootLayout(root).workspacesBase;
  for (const name of existsSync(base) ? readdirSync(base) : []) {
    if (!name.startsWith(WORKSPACE_PREFIX)) continue;
    const dir = join(base, name, "ssh-agent");
    try {
      if (lstatSync(dir).isDirectory()) pointAt(join(dir, LINK), target);
    } catch {
      // Not opted in, or removed meanwhile.
    }
  }
}

/** Quoted for the shell git runs core.sshCommand (and a `!` credential helper) with. */
export function shellWord(path: string): string {
  return `'${path.replace(/'/g, `'\\''`)}'`;
}

/** git's ssh for an opted-in checkout: OpenSSH with the workspace's agent link (git appends the rest). */
export function agentSshCommand(dir: string): string {
  return `cd ${shellWord(dir)} && exec ssh -o IdentityAgent=${LINK}`;
}

/** Opts a new checkout in: its agent directory and link, and git's ssh pointed at it. */
export async function enableAgentForwarding(root: string, layout: WorkspaceLayout): Promise<void> {
  const dir = workspaceAgentDir(layout);
  mkdirSync(dir, { mode: 0o700 });
  chmodSync(dir, 0o700);
  const link = join(dir, LINK);
  pointAt(link, currentAgentSocket(root) ?? join(dir, "no-agent-forwarded"));
  await git(["config", "core.sshCommand", agentSshCommand(dir)], { cwd: layout.checkout });
  // Not a plain `ssh` command line, so git is told it is OpenSSH rather than probing it with -G.
  await git(["config", "ssh.variant", "ssh"], { cwd: layout.checkout });
}

/**
 * The `agent-hold` mode, run by the broker on a session with agent forwarding: registers this
 * session's agent socket, points the opted-in workspaces at it, and on its end (the session
 * closed: the link was lost or the broker left) withdraws it, pointing them at another live one.
 */
export function agentHoldMain(root: string): void {
  const sock = process.env.SSH_AUTH_SOCK ?? "";
  if (!sock.startsWith("/") || !isSocket(sock)) {
    process.stdout.write(`${JSON.stringify({ forwarded: false })}\n`);
    process.exit(0);
  }
  const dir = registrations(root);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const me = join(dir, `${process.pid}-${readProcStat(process.pid)?.startTime ?? "0"}.sock`);
  pointAt(me, sock);
  pointWorkspaces(root, sock);
  process.stdout.write(`${JSON.stringify({ forwarded: true })}\n`);
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    rmSync(me, { force: true });
    const other = currentAgentSocket(root);
    pointWorkspaces(root, other ?? join(dir, "no-agent-forwarded"));
    process.exit(0);
  };
  for (const sig of ["SIGHUP", "SIGTERM", "SIGINT"] as const) process.on(sig, end);
  process.stdin.on("end", end).on("close", end).on("error", end).resume();
  process.stdout.on("error", end);
}
