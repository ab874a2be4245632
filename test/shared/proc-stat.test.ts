// The process reads' portable path: where there is no /proc (macOS, the BSDs: Paseo's laptops run
// the demo's broker stop and the daemon's checks through it) they go through POSIX `ps`. Run here on
// Linux with procps, against /proc for the same processes, so that path is exercised on every run.
import { spawn, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { listPids, readArgv, readProcStat, viaPs } from "../../src/shared/proc-stat.js";
import { needs, unless } from "../support/needs.js";

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

/** A sleeping child in a process group of its own, once it runs sleep (not the fork before the exec). */
async function sleeper(): Promise<ChildProcess> {
  const child = spawn("sleep", ["37"], { detached: true, stdio: "ignore" });
  children.push(child);
  for (let i = 0; i < 400 && readArgv(child.pid!)[0] !== "sleep"; i++) await new Promise((r) => setTimeout(r, 5));
  return child;
}

describe(
  "process reads through ps",
  unless(needs.linux("compares the ps path with /proc"), needs.command("ps", "procps is not installed")),
  () => {
    it("reads a process's parent, group, state and command as /proc does", async () => {
      const child = await sleeper();
      // Stopped, so the state letter holds still between the two reads.
      process.kill(child.pid!, "SIGSTOP");
      for (let i = 0; i < 400 && readProcStat(child.pid!)?.state !== "T"; i++) await new Promise((r) => setTimeout(r, 5));
      const proc = readProcStat(child.pid!)!;
      const ps = viaPs.readProcStat(child.pid!)!;
      expect(proc.state).toBe("T");
      expect({ pid: ps.pid, ppid: ps.ppid, pgid: ps.pgid, state: ps.state }).toEqual({
        pid: proc.pid,
        ppid: process.pid,
        pgid: child.pid,
        state: "T",
      });
      expect(viaPs.readArgv(child.pid!)).toEqual(["sleep 37"]);
      expect(viaPs.listPids()).toEqual(expect.arrayContaining([process.pid, child.pid]));
      expect(listPids()).toEqual(expect.arrayContaining([process.pid, child.pid]));
    });

    it("tells a process by its start time, and a killed one as gone", async () => {
      const child = await sleeper();
      const { startTime } = viaPs.readProcStat(child.pid!)!;
      expect(startTime).toMatch(/\d{4}$/); // lstart ends with the year
      expect(viaPs.isGone(child.pid!, startTime)).toBe(false);
      expect(viaPs.isGone(child.pid!, `${startTime} (another)`)).toBe(true);
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await exited;
      expect(viaPs.isGone(child.pid!, startTime)).toBe(true);
      expect(viaPs.readProcStat(child.pid!)).toBeNull();
      expect(viaPs.readArgv(child.pid!)).toEqual([]);
    });
  },
);
