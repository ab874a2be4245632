// How a test looks at the SSH host from the inside: its files, processes, users and programs. On
// the local rig the host is this machine. The compose container (PASEO_TEST_SSH_CONTAINER, see
// test/docker/run-compose.mjs) runs on this machine's kernel in namespaces of its own, and is seen
// through them: its files under /proc/<its init>/root, its processes in /proc numbered as the
// container (and so the runtime's answers) numbers them (the last NSpid field), signals sent to the
// matching pid here, commands run in it with `docker exec`. Any other external host cannot be seen
// from the inside: hostView() is null there and requireView() skips such cases with INSIDE_SKIP.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { getCurrentTest } from "@vitest/runner";
import { isGone as isGoneHere } from "../../src/shared/proc-stat.js";
import { gitIn } from "../fixtures/repo.js";
import { rig } from "../rig/rig.js";

export const INSIDE_SKIP = "external host: cannot look inside it";

export interface HostProcess {
  /** The pid on the host (in the container's namespace for the compose host). */
  pid: number;
  ppid: number;
  uid: number;
  /** One-letter kernel state. */
  state: string;
  argv: string[];
  /** Working directory as the host names it; null if unreadable. */
  cwd: string | null;
  rssKiB: number;
}

export interface HostView {
  /** A path on the host, as this process opens it. */
  path(hostPath: string): string;
  /** Every process on the host now (ended mid-scan ones left out). */
  processes(): HostProcess[];
  /** A host pid as this machine numbers it (null once it ended); the same pid on the local rig. */
  localPid(pid: number): number | null;
  /** Whether a host pid has ended (or, given its start time, been reused). */
  isGone(pid: number, startTime?: string): boolean;
  /** Sends a signal to a host pid (throws like process.kill when it is not there). */
  kill(pid: number, signal: NodeJS.Signals | 0): void;
  /** A user's uid and gid in the host's passwd (-1 when absent). */
  idsOf(user: string): { uid: number; gid: number };
  /** Runs a program on the host as `user`, in `cwd`, with exactly `env`; its stdout. */
  run(user: string, argv: string[], o: { cwd: string; env: Record<string, string> }): string;
}

const readOr = <T>(read: () => T, fallback: T): T => {
  try {
    return read();
  } catch {
    return fallback; // the process ended mid-scan
  }
};

function idsIn(passwd: string, user: string): { uid: number; gid: number } {
  const fields = passwd
    .split("\n")
    .find((l) => l.startsWith(`${user}:`))
    ?.split(":");
  return { uid: Number(fields?.[2] ?? -1), gid: Number(fields?.[3] ?? -1) };
}

/** The processes in /proc whose pid namespace is `ns` (all when null), numbered there. */
function procProcesses(ns: string | null): Array<HostProcess & { localPid: number }> {
  const out: Array<HostProcess & { localPid: number }> = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const dir = `/proc/${name}`;
    if (ns !== null && readOr(() => readlinkSync(`${dir}/ns/pid`), null) !== ns) continue;
    const status = readOr(() => readFileSync(`${dir}/status`, "utf8"), null);
    if (status === null) continue;
    const nspid = /^NSpid:\s+(.+)$/m.exec(status)?.[1]?.trim().split(/\s+/);
    out.push({
      localPid: Number(name),
      pid: Number(nspid?.[nspid.length - 1] ?? name),
      ppid: Number(/^PPid:\s+(\d+)/m.exec(status)?.[1] ?? 0),
      uid: Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1),
      state: /^State:\s+(\S)/m.exec(status)?.[1] ?? "?",
      argv: readOr(() => readFileSync(`${dir}/cmdline`, "utf8").split("\0").filter(Boolean), [] as string[]),
      cwd: readOr(() => readlinkSync(`${dir}/cwd`), null as string | null),
      rssKiB: Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0),
    });
  }
  // /proc names parents by this machine's pids: renumber them as the namespace does (0 outside it).
  if (ns !== null) {
    const inside = new Map(out.map((p) => [p.localPid, p.pid]));
    for (const p of out) p.ppid = inside.get(p.ppid) ?? 0;
  }
  return out;
}

const strip = ({ localPid: _, ...p }: HostProcess & { localPid: number }): HostProcess => p;

function localView(): HostView {
  return {
    path: (p) => p,
    processes: () => procProcesses(null).map(strip),
    localPid: (pid) => pid,
    isGone: (pid, startTime) => isGoneHere(pid, startTime),
    kill: (pid, signal) => void process.kill(pid, signal),
    idsOf: (user) => idsIn(readFileSync("/etc/passwd", "utf8"), user),
    run: (user, argv, o) => {
      const { uid } = idsIn(readFileSync("/etc/passwd", "utf8"), user);
      const prefix = uid === process.getuid?.() ? [] : ["setpriv", `--reuid=${user}`, `--regid=${user}`, "--init-groups"];
      const [cmd, ...args] = [...prefix, ...argv];
      return execFileSync(cmd!, args, { cwd: o.cwd, env: o.env }).toString();
    },
  };
}

function containerView(container: string): HostView {
  const init = Number(execFileSync("docker", ["inspect", "--format", "{{.State.Pid}}", container], { timeout: 30_000 }).toString().trim());
  const root = `/proc/${init}/root`;
  const ns = readlinkSync(`/proc/${init}/ns/pid`);
  const localPid = (pid: number) => procProcesses(ns).find((p) => p.pid === pid)?.localPid ?? null;
  return {
    path: (p) => join(root, p),
    processes: () => procProcesses(ns).map(strip),
    localPid,
    isGone: (pid, startTime) => {
      const here = localPid(pid);
      return here === null || isGoneHere(here, startTime);
    },
    kill: (pid, signal) => {
      const here = localPid(pid);
      if (here === null) throw Object.assign(new Error(`kill ESRCH: no pid ${pid} in the container`), { code: "ESRCH" });
      process.kill(here, signal);
    },
    idsOf: (user) => idsIn(readFileSync(join(root, "etc/passwd"), "utf8"), user),
    run: (user, argv, o) =>
      execFileSync(
        "docker",
        [
          "exec",
          "--user",
          user,
          "--workdir",
          o.cwd,
          ...Object.entries(o.env).flatMap(([k, v]) => ["--env", `${k}=${v}`]),
          container,
          ...argv,
        ],
        { timeout: 60_000 },
      ).toString(),
  };
}

let cached: HostView | null | undefined;

/** The view of the rig's host from the inside, or null for an external host it cannot see into. */
export function hostView(): HostView | null {
  if (cached === undefined) {
    const r = rig();
    cached = r.container ? containerView(r.container) : r.external ? null : localView();
  }
  return cached;
}

/**
 * The view; on a host it cannot see into, skips the running test saying why (INSIDE_SKIP), or
 * throws that reason outside a test (a suite's set-up).
 */
export function requireView(): HostView {
  const view = hostView();
  if (view) return view;
  const reason = `${INSIDE_SKIP}: this case looks at the host's files, processes or users`;
  getCurrentTest()?.context.skip(reason);
  throw new Error(reason);
}

/** Starts `argv` on the host as `user`, detached from everything; its pid there. */
export function startOnHost(user: string, argv: string[]): number {
  const script = 'exec "$@" </dev/null >/dev/null 2>&1 & echo $!';
  return Number(
    requireView()
      .run(user, ["/bin/sh", "-c", script, "sh", ...argv], { cwd: "/", env: { PATH: "/usr/bin:/bin" } })
      .trim(),
  );
}

/** A path on the host as this process opens it (the same path on the local rig). */
export function onHost(hostPath: string): string {
  return requireView().path(hostPath);
}

/** Runs git in a repository on the host, as root, whoever owns it (gitIn, but on the host). */
export function hostGit(cwd: string, args: string[]): string {
  const view = requireView();
  if (!rig().container) return gitIn(cwd, args);
  return view.run("root", ["git", "-c", "safe.directory=*", ...args], { cwd, env: { GIT_CONFIG_NOSYSTEM: "1" } });
}
