// The workspace's process set: every remote process its execs started, including setsid'd and
// re-parented descendants. Used by pause (SIGSTOP sweep), resume (SIGCONT), destroy/reconcile
// (SIGKILL) and the exec supervisor.
//
// Membership (Linux): every workload is spawned with descriptor TAG_FD open on its exec's tag file
// `<dir>/execs/<hash>.tag`. Descendants inherit it across fork, exec, setsid and re-parenting, so
// /proc/<pid>/fd/TAG_FD names the exec and the workspace of any process that did not close it.
// Processes that did close it (e.g. children of programs that close all descriptors) are still
// found through their session: that of a tagged member, or one recorded when a pipes workload
// started (`<dir>/sessions/`). Our own agent processes never hold the tag on TAG_FD and are
// excluded by their command line. macOS: best effort through recorded groups.
import { mkdirSync, readFileSync, realpathSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { RuntimeError } from "../../shared/errors.js";
import type { ProcessInfo } from "../../shared/agent-api.js";
import { hashName, type WorkspaceLayout } from "../layout.js";
import { fdLink, isGone, listPids, readArgv, readProcStat, sendSignal, type ProcStat } from "../../shared/proc-stat.js";
import { readRecordFile } from "../exec/records.js";
import { sleep } from "../../shared/async.js";

/** Descriptor number that carries the tag in every workload process (high, so programs leave it alone). */
export const TAG_FD = 47;

/** Bounds of the sweeps: a fork bomb cannot keep pause or destroy busy forever. */
const MAX_SWEEPS = 20;
const SETTLE_MS = 2000;
const POLL_MS = 10;

export function execTagPath(layout: WorkspaceLayout, execId: string): string {
  return join(layout.execs, `${hashName(execId)}.tag`);
}

/** `tag`: where TAG_FD points (null for members found through their session). */
export type Member = ProcStat & { argv: string[]; tag: string | null };

function variants(path: string): string[] {
  const out = [path];
  try {
    const real = realpathSync(path);
    if (real !== path) out.push(real);
  } catch {
    // Gone already (destroyed workspace): the recorded spelling is all we have.
  }
  return out;
}

/** Our agents (control agents, pty-attach and the shells that start them) must never be members. */
function isAgentProcess(argv: string[], agentBases: string[]): boolean {
  return argv.some((a) => agentBases.some((b) => a.includes(b)));
}

/** A session our pipes workload created (it leads it): `<dir>/sessions/<sid>.<startTime>.<execHash>`. */
interface RecordedSession {
  sid: number;
  startTime: string;
  path: string;
}

const SESSIONS_DIR = "sessions";

/**
 * Records the session a pipes workload leads, so members that closed the tag descriptor (e.g.
 * children of programs that close all descriptors) stay findable after every tagged process of
 * that session exited. Linux only (start times are comparable clock ticks there).
 */
export function recordSession(layout: WorkspaceLayout, execId: string, sid: number, startTime: string): void {
  if (process.platform !== "linux") return;
  const dir = join(layout.dir, SESSIONS_DIR);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return; // the workspace was destroyed meanwhile (its processes with it)
    if (code !== "EEXIST") throw err;
  }
  writeFileSync(join(dir, `${sid}.${startTime}.${hashName(execId)}`), "", { mode: 0o600 });
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
    const [sid, startTime, hash] = name.split(".");
    if (!sid || !startTime || !hash || (execHash !== undefined && hash !== execHash)) continue;
    out.push({ sid: Number(sid), startTime, path: join(dir, name) });
  }
  return out;
}

/**
 * Whether `st` is in a recorded session of ours. A session id is not reused while any process
 * still has it, so a member is ours unless the session's leader is a different (newer) process
 * than the one we recorded, or the member started before our leader did.
 */
function inRecordedSession(st: ProcStat, recorded: Map<number, RecordedSession>): boolean {
  const r = recorded.get(st.sid);
  if (!r) return false;
  if (st.pid === r.sid) return st.startTime === r.startTime;
  const leader = readProcStat(r.sid);
  if (leader && leader.state !== "Z" && leader.startTime !== r.startTime) return false;
  return Number(st.startTime) >= Number(r.startTime);
}

function scan(
  layout: Pick<WorkspaceLayout, "dir">,
  matches: (link: string) => boolean,
  extraGroups: number[] = [],
  recorded: RecordedSession[] = [],
): Member[] {
  const agentBases = variants(join(dirname(dirname(layout.dir)), "agent")).map((p) => p + "/");
  const pids = listPids().filter((p) => p !== process.pid);
  const sessions = new Set<number>();
  const members = new Map<number, Member>();
  const consider = (st: ProcStat | null, tag: string | null = null): Member | null => {
    if (!st || st.state === "Z" || st.state === "X") return null;
    const argv = readArgv(st.pid);
    if (isAgentProcess(argv, agentBases)) return null;
    return { ...st, argv, tag };
  };
  for (const pid of pids) {
    const link = fdLink(pid, TAG_FD);
    if (link === null || !matches(link)) continue;
    const m = consider(readProcStat(pid), stripDeleted(link));
    if (m) members.set(pid, m);
  }
  // A session counts as ours when a tagged process leads it or its leader is gone (a session id
  // cannot be reused while members remain). A PTY workload sits in the session of pty-attach,
  // which is not tagged, so that session is never swept as a whole.
  for (const m of members.values()) {
    if (members.has(m.sid) || isGone(m.sid)) sessions.add(m.sid);
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

function stripDeleted(link: string): string {
  return link.endsWith(" (deleted)") ? link.slice(0, -" (deleted)".length) : link;
}

function tagMatcher(prefixes: string[], exact: boolean): (link: string) => boolean {
  return (link) => {
    const path = stripDeleted(link);
    return prefixes.some((p) => (exact ? path === p : path.startsWith(p)));
  };
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

function workspaceMembers(layout: WorkspaceLayout): Member[] {
  const prefixes = variants(layout.dir).map((p) => p + "/");
  return scan(layout, tagMatcher(prefixes, false), recordedGroups(layout), recordedSessions(layout.dir));
}

/** Processes of one exec: its workload and every descendant that kept the tag or its session. */
export function execMembers(layout: WorkspaceLayout, execId: string, pgid?: number): Member[] {
  return membersByTag(layout.dir, execTagPath(layout, execId), pgid);
}

/** Same, given the workspace directory and the exec's tag file (what pty-attach knows). */
export function membersByTag(workspaceDir: string, tagPath: string, pgid?: number): Member[] {
  const groups = process.platform === "linux" || pgid === undefined ? [] : [pgid];
  const execHash = basename(tagPath).replace(/\.tag$/, "");
  return scan({ dir: workspaceDir }, tagMatcher(variants(tagPath), true), groups, recordedSessions(workspaceDir, execHash));
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
  const stopped = await waitUntil(
    () =>
      [...frozen].every(([pid, start]) => {
        const st = readProcStat(pid);
        return !st || st.startTime !== start || isStopped(st.state) || st.state === "Z";
      }),
    SETTLE_MS,
  );
  if (!stopped) throw new RuntimeError("remote", `Workspace processes did not stop: ${layout.dir}`);
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
