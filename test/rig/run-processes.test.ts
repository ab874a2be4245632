// The run's processes are found by the mark they inherit, by running in a remote root of the run,
// or by descending from either; other runs' processes are not; and whatever outlives the grace
// period is killed and named, which is what fails a run that leaves something behind.
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { waitFor } from "./rig.js";
import { RUN_MARK_VARIABLE, pin, reapRun, runProcesses, signal, type RunIdentity } from "./run-processes.js";
import { needs, unless } from "../support/needs.js";

const s = suite();

function identity(): RunIdentity {
  const runId = randomBytes(4).toString("hex");
  return { runId, rootMarks: [`/.paseo-ssh-test-${runId}`], exclude: () => false, pids: [], pinned: new Set() };
}

function start(argv: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): number {
  const child = spawn(argv[0]!, argv.slice(1), {
    stdio: "ignore",
    env: opts.env ?? { PATH: "/usr/bin:/bin" },
    cwd: opts.cwd,
    detached: true,
  });
  // Each child leads its own process group: the group goes, grandchildren included.
  s.push(() => signal([-child.pid!], "SIGKILL"));
  return child.pid!;
}

const pids = (id: RunIdentity) => runProcesses(id).map((p) => p.pid);

describe("processes of a test run", unless(needs.linux("reads processes from /proc")), () => {
  it("are those carrying the run's mark, running in its roots, and their descendants; not another run's", async () => {
    const id = identity();
    const other = identity();
    const marked = start(["sleep", "61"], { env: { PATH: "/usr/bin:/bin", [RUN_MARK_VARIABLE]: id.runId } });
    const root = join(s.tmp("paseo-home-"), `.paseo-ssh-test-${id.runId}-t-1`);
    mkdirSync(root);
    const inRoot = start(["sleep", "62"], { cwd: root });
    // The shell stays as the parent of a child whose environment was emptied.
    const parent = start(["/bin/sh", "-c", "env -i /bin/sleep 63 & wait"], {
      env: { PATH: "/usr/bin:/bin", [RUN_MARK_VARIABLE]: id.runId },
    });
    const foreign = start(["sleep", "64"], { env: { PATH: "/usr/bin:/bin", [RUN_MARK_VARIABLE]: other.runId } });

    // Until exec, a child still has this worker's environment and directory.
    const ready = () => {
      const now = runProcesses(id);
      const has = (pid: number) => now.some((p) => p.pid === pid);
      return (
        has(marked) && has(inRoot) && now.some((p) => p.ppid === parent && p.command === "/bin/sleep 63") && pids(other).includes(foreign)
      );
    };
    await waitFor(ready, 5000);
    const found = runProcesses(id);
    expect(found.map((p) => p.pid)).toEqual(expect.arrayContaining([marked, inRoot, parent]));
    expect(found.find((p) => p.ppid === parent)?.command).toBe("/bin/sleep 63");
    expect(found.find((p) => p.pid === inRoot)?.cwd).toBe(root);
    expect(pids(id)).not.toContain(foreign);
    expect(pids(other)).toEqual([foreign]);
  });

  it("include a process named by pid with its descendants, which stay the run's once pinned, orphaned or not", async () => {
    const id = identity();
    const server = start(["/bin/sh", "-c", "/bin/sleep 66 & wait"]);
    id.pids.push(server);
    await waitFor(() => runProcesses(id).some((p) => p.ppid === server), 5000);
    const session = runProcesses(id).find((p) => p.ppid === server)!;
    expect(session.command).toBe("/bin/sleep 66");
    pin(id);
    process.kill(server, "SIGKILL");
    await waitFor(() => !pids(id).includes(server), 5000);
    expect(pids(id)).toEqual([session.pid]);
    process.kill(session.pid, "SIGKILL");
  });

  it("leaves nothing to report when nothing of the run is left", async () => {
    expect(await reapRun(identity(), 200)).toEqual([]);
  });

  it("whatever outlives the grace period is killed and named", async () => {
    const id = identity();
    const leaked = start(["sleep", "65"], { env: { PATH: "/usr/bin:/bin", [RUN_MARK_VARIABLE]: id.runId } });
    await waitFor(() => pids(id).includes(leaked), 5000);
    const problems = await reapRun(id, 200);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      new RegExp(`^1 process\\(es\\) of this run still running after 200 ms \\(killed now\\): ${leaked} \\(uid \\d+\\) sleep 65`),
    );
    expect(pids(id)).toEqual([]);
  });
});
