// The workspace's process set: every remote process its execs started, including setsid'd and
// re-parented descendants. Used by pause (SIGSTOP sweep), resume (SIGCONT), destroy/reconcile
// (SIGKILL) and the exec supervisor.
//
// Membership (Linux): every workload is spawned with descriptor TAG_FD open on its exec's tag file
// `<dir>/execs/<hash>.tag`. Descendants inherit it across fork, exec, setsid and re-parenting, so
// the file a process holds on TAG_FD (matched by device and inode, process-tags.ts) names the exec
// and the workspace of any process that did not close it. Processes that did close it (e.g.
// children of programs that close all descriptors) are still found through their session, but
// only a session our workload created: one recorded when an exec started (`<dir>/sessions/`), or
// one led by a tagged process. Our own agents and terminal relays never hold a tag and are in none
// of those sessions, except the one that leads a PTY exec's session (pty-attach on sshd's pty, our
// child under util-linux `script`), excluded as that session's recorded leader (pid + start
// time). macOS: best effort through recorded groups.
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { RuntimeError } from "../../shared/errors.js";
import type { ProcessInfo } from "../../shared/agent-api.js";
import { hashName, type WorkspaceLayout } from "../layout.js";
import { isGone, listPids, readArgv, readProcStat, sendSignal, type ProcStat } from "../../shared/proc-stat.js";
import { readRecordFile } from "../exec/records.js";
import { sleep } from "../../shared/async.js";
import { execTags, heldTag, workspaceTags, type TagSet } from "./process-tags.js";

export { TAG_FD } from "./process-tags.js";

/** Bounds of the sweeps: a fork bomb cannot keep pause or destroy busy forever. */
const MAX_SWEEPS = 20;
/**
 * How long a SIGSTOPped member may take to show as stopped. A process in uninterruptible sleep
 * (a write to a busy disk) takes the stop only once it leaves it: 2 s was missed once by a loop
 * appending to a file while the compose CI pass loaded the disk. Pause stays within A27's 5 s.
 */
const SETTLE_MS = 4000;
const POLL_MS = 10;

export function execTagPath(layout: WorkspaceLayout, execId: string): string {
  return join(layout.execs, `${hashName(execId)}.tag`);
}

/** `tag`: the tag file held on TAG_FD (null for members found through their session). */
export type Member = ProcStat & { argv: string[]; tag: string | null };

/**
 * A session our workload created, recorded when its exec started:
 * `<dir>/sessions/<sid>.<leaderStart>.<execHash>` when the workload leads it (pipes, PTY on a
 * python3 relay), or `<sid>.<leaderStart>.<execHash>.<since>` when the process of ours that started
 * the workload leads it (pty-attach, in the session sshd made for the PTY channel; our child under
 * util-linux `script`): the leader is then not a member, and
 * neither is anything started before the workload (`since`), e.g. by the login shell's rc files.
 */
interface RecordedSession {
  sid: number;
  startTime: string;
  /** Members started before this (clock ticks) are not ours. */
  since: string;
  /** The leader is our agent, not a member. */
  agentLeader: boolean;
  path: string;
}

const SESSIONS_DIR = "sessions";

/**
 * Records the session an exec's workload runs in, so members that closed the tag descriptor
 * stay findable after every tagged process of that session exited. Linux only (start times are
 * comparable clock ticks there).
 */
export function recordSession(layout: WorkspaceLayout, execId: string, workload: { pid: number; sid: number; startTime: string }): void {
  if (process.platform !== "linux") return;
  let name = `${workload.sid}.${workload.startTime}.${hashName(execId)}`;
  if (workload.sid !== workload.pid) {
    const leader = readProcStat(workload.sid);
    if (!leader) return;
    name = `${workload.sid}.${leader.startTime}.${hashName(execId)}.${workload.startTime}`;
  }
  const dir = join(layout.dir, SESSIONS_DIR);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return; // the workspace was destroyed meanwhile (its processes with it)
    if (code !== "EEXIST") throw err;
  }
  writeFileSync(join(dir, name), "", { mode: 0o600 });
}

function recordedSessions(workspaceDir: string, execHash?: string): RecordedSession[] {
  const dir = join(workspaceDir, SESSIONS_DIR);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: RecordedSession[] = [];
  for (const name of names) {
    const [sid, startTime, hash, since] = name.split(".");
    if (!sid || !startTime || !hash || (execHash !== undefined && hash !== execHash)) continue;
    out.push({ sid: Number(sid), startTime, since: since ?? startTime, agentLeader: since !== undefined, path: join(dir, name) });
  }
  return out;
}

/**
 * Whether `st` is in a recorded session of ours. A session id is not reused while any process
 * still has it, so a member is ours unless the session's leader is a different (newer) process
 * than the one we recorded, or the member started before our workload did.
 */
function inRecordedSession(st: ProcStat, recorded: Map<number, RecordedSession>): boolean {
  const r = recorded.get(st.sid);
  if (!r) return false;
  if (st.pid === r.sid) return !r.agentLeader && st.startTime === r.startTime;
  const leader = readProcStat(r.sid);
  if (leader && leader.state !== "Z" && leader.startTime !== r.startTime) return false;
  return Number(st.startTime) >= Number(r.since);
}

function scan(tags: TagSet, extraGroups: number[] = [], recorded: RecordedSession[] = []): Member[] {
  const pids = listPids().filter((p) => p !== process.pid);
  const sessions = new Set<number>();
  const members = new Map<number, Member>();
  const consider = (st: ProcStat | null, tag: string | null = null): Member | null => {
    if (!st || st.state === "Z" || st.state === "X") return null;
    return { ...st, argv: readArgv(st.pid), tag };
  };
  for (const pid of pids) {
    const tag = heldTag(pid, tags);
    if (tag === null) continue;
    const m = consider(readProcStat(pid), tag);
    if (m) members.set(pid, m);
  }
  // A tagged process that leads its session created it (setsid while holding our tag): all of it
  // is ours. A session whose leader is merely gone proves nothing and is not swept.
  for (const m of members.values()) {
    if (m.pid === m.sid) sessions.add(m.sid);
  }
  const groups = new Set(extraGroups);
  const recordedBySid = new Map(recorded.map((r) => [r.sid, r]));
  if (sessions.size === 0 && groups.size === 0 && recordedBySid.size === 0) return [...members.values()];
  const seenSids = new Set<number>();
  for (const pid of pids) {
    const st = readProcStat(pid);
    if (!st) continue;
    seenSids.add(st.sid);
    if (members.has(pid)) continue;
    if (!(sessions.has(st.sid) || groups.has(st.pgid) || inRecordedSession(st, recordedBySid))) continue;
    const m = consider(st);
    if (m) members.set(pid, m);
  }
  // A recorded session nobody is in any more is finished for good: forget it.
  for (const r of recorded) {
    if (!seenSids.has(r.sid)) rmSync(r.path, { force: true });
  }
  return [...members.values()];
}

/**
 * Whether a tagged process belongs to an exec nobody supervises any more: recorded abandoned, or
 * still starting/running although its control agent is gone. Resume reaps these instead of
 * reviving them; leftovers of execs that finished normally are resumed.
 */
function unsupervised(tag: string): boolean {
  if (!tag.endsWith(".tag")) return false;
  const rec = readRecordFile(`${tag.slice(0, -".tag".length)}.json`);
  if (!rec) return false;
  if (rec.state === "abandoned") return true;
  return (rec.state === "running" || rec.state === "starting") && isGone(rec.agentPid, rec.agentStartTime ?? undefined);
}

/** Groups recorded for running execs: the only membership evidence on hosts without /proc. */
function recordedGroups(layout: WorkspaceLayout): number[] {
  if (process.platform === "linux") return [];
  const groups: number[] = [];
  let names: string[] = [];
  try {
    names = readdirSync(layout.execs).filter((n) => n.endsWith(".json"));
  } catch {
    return groups;
  }
  for (const n of names) {
    const rec = readRecordFile(join(layout.execs, n));
    if (rec && rec.pgid && rec.pid && rec.startTime && !isGone(rec.pid, rec.startTime)) groups.push(rec.pgid);
  }
  return groups;
}

/** Every process of the workspace (tagged, or in a session its workload created). */
export function workspaceMembers(layout: WorkspaceLayout): Member[] {
  return scan(workspaceTags(layout.execs), recordedGroups(layout), recordedSessions(layout.dir));
}

/** Processes of one exec: its workload and every descendant that kept the tag or its session. */
export function execMembers(layout: WorkspaceLayout, execId: string, pgid?: number): Member[] {
  return membersByTag(layout.dir, execTagPath(layout, execId), pgid);
}

/** Same, given the workspace directory and the exec's tag file (what pty-attach knows). */
export function membersByTag(workspaceDir: string, tagPath: string, pgid?: number): Member[] {
  const groups = process.platform === "linux" || pgid === undefined ? [] : [pgid];
  const execHash = basename(tagPath).replace(/\.tag$/, "");
  return scan(execTags(tagPath), groups, recordedSessions(workspaceDir, execHash));
}

function toInfo(m: Member): ProcessInfo {
  return { pid: m.pid, state: m.state, command: m.argv.join(" ") };
}

/** Waits (bounded) until `done` holds; returns whether it did. */
async function waitUntil(done: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (done()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(POLL_MS);
  }
}

/** Lists the live processes of the workspace (diagnostics and tests). */
export async function listWorkspaceProcesses(layout: WorkspaceLayout): Promise<ProcessInfo[]> {
  return workspaceMembers(layout).map(toInfo);
}

/** SIGSTOPs every process of the set, repeating the sweep until no new member appears. */
export async function freezeWorkspaceProcesses(layout: WorkspaceLayout): Promise<void> {
  const frozen = new Map<number, string>();
  const alreadyStopped: string[] = [];
  for (let i = 0; i < MAX_SWEEPS; i++) {
    const fresh = workspaceMembers(layout).filter((m) => frozen.get(m.pid) !== m.startTime);
    if (fresh.length === 0) break;
    for (const m of fresh) {
      if (isStopped(m.state)) alreadyStopped.push(identityKey(m));
      if (sendSignal(m.pid, "SIGSTOP")) frozen.set(m.pid, m.startTime);
    }
  }
  rememberAlreadyStopped(layout, alreadyStopped);
  // SIGSTOP is asynchronous; report paused only once every member really is stopped.
  const running = () =>
    [...frozen].flatMap(([pid, start]) => {
      const st = readProcStat(pid);
      return !st || st.startTime !== start || isStopped(st.state) || st.state === "Z" ? [] : [`${pid} (state ${st.state})`];
    });
  if (!(await waitUntil(() => running().length === 0, SETTLE_MS))) {
    // The workspace stays paused (its manifest says so); pause again, or resume, finishes the job.
    const left = running();
    throw new RuntimeError(
      "remote",
      `Workspace processes did not stop within ${SETTLE_MS} ms: ${layout.dir} (pids ${left.join(", ") || "none left now"})`,
    );
  }
}

/**
 * SIGCONTs the processes of the set, except those that were already stopped before the pause
 * (e.g. a job suspended in a terminal) and those of unsupervised execs, which are reaped.
 */
export async function thawWorkspaceProcesses(layout: WorkspaceLayout): Promise<void> {
  const members = workspaceMembers(layout);
  const keepStopped = readAlreadyStopped(layout);
  const orphans = members.filter((m) => m.tag !== null && unsupervised(m.tag));
  for (const m of members) {
    if (!orphans.includes(m) && !keepStopped.has(identityKey(m))) sendSignal(m.pid, "SIGCONT");
  }
  rmSync(join(layout.dir, ALREADY_STOPPED), { force: true });
  if (orphans.length > 0) {
    const pids = new Set(orphans.map((m) => m.pid));
    await killMembers(() => workspaceMembers(layout).filter((m) => pids.has(m.pid)), `${layout.dir} (unsupervised execs)`);
  }
}

const ALREADY_STOPPED = "stopped-before-pause.json";

function isStopped(state: string): boolean {
  return state === "T" || state === "t";
}

function identityKey(m: { pid: number; startTime: string }): string {
  return `${m.pid}:${m.startTime}`;
}

/**
 * Records which members were stopped before this pause, so resume leaves them stopped. Only the
 * first pause of a paused period writes it (a repeated pause sees everything stopped by us).
 */
function rememberAlreadyStopped(layout: WorkspaceLayout, keys: string[]): void {
  try {
    writeFileSync(join(layout.dir, ALREADY_STOPPED), JSON.stringify(keys) + "\n", { mode: 0o600, flag: "wx" });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EEXIST" && code !== "ENOENT") throw err;
  }
}

function readAlreadyStopped(layout: WorkspaceLayout): Set<string> {
  try {
    const keys = JSON.parse(readFileSync(join(layout.dir, ALREADY_STOPPED), "utf8")) as unknown;
    return new Set(Array.isArray(keys) ? keys.filter((k): k is string => typeof k === "string") : []);
  } catch {
    return new Set(); // not paused by us, or nothing was stopped before
  }
}

/** SIGKILLs the given membership until it is empty (works on stopped processes too), bounded. */
export async function killMembers(list: () => Member[], what: string): Promise<void> {
  const killed = new Map<number, string>();
  const deadline = Date.now() + SETTLE_MS;
  for (let i = 0; i < MAX_SWEEPS && Date.now() < deadline; i++) {
    const members = list();
    if (members.length === 0) break;
    for (const m of members) {
      sendSignal(m.pid, "SIGKILL");
      killed.set(m.pid, m.startTime);
    }
    await sleep(i === 0 ? 0 : POLL_MS);
  }
  const gone = await waitUntil(() => [...killed].every(([pid, start]) => isGone(pid, start)), Math.max(0, deadline - Date.now()));
  const left = list();
  if (!gone || left.length > 0) {
    const pids = left.length > 0 ? left.map((m) => m.pid) : [...killed.keys()].filter((p) => !isGone(p));
    throw new RuntimeError("remote", `Workspace processes did not stop: ${what} (pids ${pids.join(", ")})`);
  }
}

/** SIGKILLs every process of the set (works on stopped processes too) and waits, bounded. */
export async function killWorkspaceProcesses(layout: WorkspaceLayout): Promise<void> {
  await killMembers(() => workspaceMembers(layout), layout.dir);
}
