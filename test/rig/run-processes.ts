// A finished test run must leave no process behind. The run's processes are recognised three ways:
// local ones (runtime CLIs and their detached brokers) inherit RUN_MARK_VARIABLE=<run id> from the
// vitest process; remote ones (agents and workloads, started by the server with a fresh
// environment) run from, or in, one of the run's remote roots, whose paths carry the run id; and
// the rig names its sshd by pid (sshd writes its process title over its environment). Their
// descendants count too. Other runs on the machine carry other ids.
// Linux only (/proc); elsewhere the scan finds nothing and only what the rig knows by pid is stopped.
import { existsSync, readFileSync, readlinkSync } from "node:fs";
import { listPids, readArgv, readProcStat } from "../../src/shared/proc-stat.js";

export const RUN_MARK_VARIABLE = "PASEO_TEST_RUN";

export interface RunProcess {
  pid: number;
  ppid: number;
  uid: number;
  /** argv joined with spaces (a broker shows its title, `paseo-ssh-broker`). */
  command: string;
  cwd: string | null;
  /** Start time (clock ticks since boot): with the pid, names one process even if pids are reused. */
  started: string;
}

export interface RunIdentity {
  runId: string;
  /** Parts of path that only the run's remote roots contain (they carry the run id). */
  rootMarks: string[];
  /** Processes never reported: vitest itself and its workers. */
  exclude: (p: RunProcess) => boolean;
  /** Live processes that are the run's (with their descendants), by pid. */
  pids: number[];
  /** Processes seen earlier as the run's (see `pin`), which may have lost their parent since. */
  pinned: Set<string>;
}

const key = (p: RunProcess) => `${p.pid}:${p.started}`;

/** Remembers the run's current processes: a server session stays the run's once its server is gone. */
export function pin(id: RunIdentity): void {
  for (const p of runProcesses(id)) id.pinned.add(key(p));
}

function readOr<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback;
  }
}

function processInfo(pid: number): RunProcess | null {
  const stat = readProcStat(pid);
  // Zombies have exited; their parent just has not reaped them yet.
  if (!stat || stat.state === "Z" || stat.state === "X") return null;
  const uidLine = readOr(() => readFileSync(`/proc/${pid}/status`, "utf8"), "").match(/^Uid:\s+(\d+)/m);
  return {
    pid,
    ppid: stat.ppid,
    uid: uidLine ? Number(uidLine[1]) : -1,
    // A process title pads its command line with NULs.
    command: readArgv(pid).join(" ").trim(),
    cwd: readOr(() => readlinkSync(`/proc/${pid}/cwd`), null),
    started: stat.startTime,
  };
}

function carriesMark(pid: number, runId: string): boolean {
  const environ = readOr(() => readFileSync(`/proc/${pid}/environ`, "latin1"), "");
  return environ.split("\0").includes(`${RUN_MARK_VARIABLE}=${runId}`);
}

/** Every live process of this run (not vitest's own). */
export function runProcesses(id: RunIdentity): RunProcess[] {
  if (!existsSync("/proc/self/stat")) return [];
  const all = listPids()
    .filter((pid) => pid !== process.pid)
    .map(processInfo)
    .filter((p): p is RunProcess => p !== null);
  const ours = new Set(
    all
      .filter(
        (p) =>
          id.pids.includes(p.pid) ||
          id.pinned.has(key(p)) ||
          id.rootMarks.some((mark) => p.command.includes(mark) || (p.cwd?.includes(mark) ?? false)) ||
          (!id.exclude(p) && carriesMark(p.pid, id.runId)),
      )
      .map((p) => p.pid),
  );
  // Descendants of the run's processes (a workload that left its workspace directory, say).
  for (let grown = true; grown;) {
    grown = false;
    for (const p of all) {
      if (!ours.has(p.pid) && ours.has(p.ppid) && !id.exclude(p)) {
        ours.add(p.pid);
        grown = true;
      }
    }
  }
  return all.filter((p) => ours.has(p.pid) && !id.exclude(p));
}

export function describeProcess(p: RunProcess): string {
  return `${p.pid} (uid ${p.uid}) ${p.command.slice(0, 160)}${p.cwd ? ` [cwd ${p.cwd}]` : ""}`;
}

export function signal(pids: number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // Already gone.
    }
  }
}

/** Polls until no process of the run is left or `ms` passed; returns what is left. */
export async function waitForNone(id: RunIdentity, ms: number): Promise<RunProcess[]> {
  const deadline = Date.now() + ms;
  for (;;) {
    const left = runProcesses(id);
    if (left.length === 0 || Date.now() >= deadline) return left;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The run's last word on its processes: waits up to `graceMs` for them to end by themselves, then
 * kills what is left. Resolves with one line per problem (empty when nothing had to be killed).
 */
export async function reapRun(id: RunIdentity, graceMs: number, killWaitMs = 2_000): Promise<string[]> {
  const left = await waitForNone(id, graceMs);
  if (left.length === 0) return [];
  signal(
    left.map((p) => p.pid),
    "SIGKILL",
  );
  const problems = [
    `${left.length} process(es) of this run still running after ${graceMs} ms (killed now): ${left.map(describeProcess).join("; ")}`,
  ];
  const unkillable = await waitForNone(id, killWaitMs);
  if (unkillable.length > 0) problems.push(`could not kill: ${unkillable.map(describeProcess).join("; ")}`);
  return problems;
}

/**
 * Runs detached beside vitest (`node -e WATCHDOG <vitest pid> <run id> [server pid]`): if vitest
 * dies without its teardown (SIGKILL, a timeout), it stops the server and asks every process
 * carrying the run's mark to stop. Brokers close their SSH connections on SIGTERM, which ends their
 * server sessions and remote agents. Exits once vitest is gone, or when the teardown ends it.
 */
export const WATCHDOG = `
const fs = require("node:fs");
const [parent, runId, server] = process.argv.slice(1);
const mark = "${RUN_MARK_VARIABLE}=" + runId;
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch (e) { return e.code === "EPERM"; } };
setInterval(() => {
  if (alive(Number(parent))) return;
  if (server) try { process.kill(Number(server), "SIGTERM"); } catch {}
  for (const name of fs.existsSync("/proc") ? fs.readdirSync("/proc") : []) {
    if (!/^\\d+$/.test(name) || Number(name) === process.pid) continue;
    let env = "";
    try { env = fs.readFileSync("/proc/" + name + "/environ", "latin1"); } catch {}
    if (env.split("\\0").includes(mark)) try { process.kill(Number(name), "SIGTERM"); } catch {}
  }
  process.exit(0);
}, 500);
`;
