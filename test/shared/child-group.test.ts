// Children that lead their own process group (src/shared/child-group.ts) and the git errors built
// on them, with real local processes: a timeout ends a whole pipeline, a descendant holding the
// pipes cannot hold up the end, a git timeout (gitResult and gitStream alike) ends git's children
// too, and a git failure names its subcommand past leading options.
// The same behaviour over SSH: lfs.test.ts (a hanging LFS filter), pool.test.ts (hostsCommand pipelines).
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { CLOSE_GRACE_MS, spawnGroup } from "../../src/shared/child-group.js";
import { gitFailure, gitResult, gitStream, gitSubcommand } from "../../src/shared/git-exec.js";

/** State and process group of `pid` (null once it is gone). */
function stat(pid: number): { state: string; pgid: number } | null {
  try {
    const line = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = line.slice(line.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0]!, pgid: Number(fields[2]) };
  } catch {
    return null;
  }
}

/** A killed process may linger as a zombie until its new parent reaps it: that one has ended. */
const running = (pid: number): boolean => (stat(pid)?.state ?? "Z") !== "Z";

/** Whether `pid` has ended within a few seconds: a killed process's exit is asynchronous, slower on a loaded machine. */
async function endsSoon(pid: number): Promise<boolean> {
  for (let i = 0; i < 250 && running(pid); i++) await new Promise((r) => setTimeout(r, 20));
  return !running(pid);
}

/** Pids of process group `pgid` still running. */
const groupMembers = (pgid: number): number[] =>
  readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((pid) => stat(pid)?.pgid === pgid && running(pid));

/** Pids of process group `pgid` still running a few seconds on (as endsSoon: a SIGKILL lands asynchronously). */
async function groupLeft(pgid: number): Promise<number[]> {
  for (let i = 0; i < 250 && groupMembers(pgid).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
  return groupMembers(pgid);
}

describe("spawnGroup", () => {
  it("a timeout kills every process of a pipeline, not just the shell", async () => {
    const g = spawnGroup("sh", ["-c", "sleep 30 | cat"], { stdin: "ignore", timeoutMs: 300 });
    const t0 = Date.now();
    const end = await g.ended;
    expect(end).toMatchObject({ timedOut: true, code: null, signal: "SIGKILL" });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(await groupLeft(g.child.pid!)).toEqual([]);
  });

  it("a descendant holding stdout after the child exited is killed after the grace; the exit status is kept", async () => {
    const g = spawnGroup("sh", ["-c", "sleep 30 & echo started; exit 3"], { stdin: "ignore", timeoutMs: 60_000 });
    let out = "";
    g.child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    const t0 = Date.now();
    const end = await g.ended;
    expect(end).toEqual({ code: 3, signal: null, timedOut: false });
    expect(out).toBe("started\n");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(CLOSE_GRACE_MS - 100);
    expect(Date.now() - t0).toBeLessThan(CLOSE_GRACE_MS + 10_000);
    expect(await groupLeft(g.child.pid!)).toEqual([]);
  });

  it("a program that does not exist rejects", async () => {
    const g = spawnGroup("/nonexistent/program", [], { stdin: "ignore", timeoutMs: 1000 });
    await expect(g.ended).rejects.toThrow(/ENOENT/);
  });
});

describe("git errors", () => {
  const s = suite();

  it("name the subcommand past -c, -C and other leading options", () => {
    expect(gitSubcommand(["-c", "checkout.workers=0", "-c", "a=b", "checkout", "--quiet"])).toBe("checkout");
    expect(gitSubcommand(["-C", "/x", "--no-pager", "--git-dir", "/y", "log"])).toBe("log");
    expect(gitSubcommand(["--git-dir=/y", "status"])).toBe("status");
    expect(gitSubcommand([])).toBe("");
    expect(gitFailure(["-c", "k=v", "checkout"], 128, null, "fatal: x\n").message).toBe("git checkout failed (exit 128): fatal: x");
    expect(gitFailure(["-c", "k=v", "checkout"], null, "SIGKILL", "", "remote", 3000).message).toBe(
      "git checkout did not finish within 3000 ms",
    );
  });

  it("a git whose alias leaves a child holding its stderr: the result comes after the grace, the child is killed", async () => {
    const repo = s.tmp("child-group-git-");
    writeFileSync(join(repo, "held.sh"), `#!/bin/sh\nsleep 30 >&2 &\necho $! > ${join(repo, "pid")}\n`, { mode: 0o755 });
    const t0 = Date.now();
    const r = await gitResult(["-c", `alias.held=!${join(repo, "held.sh")}`, "held"], { cwd: repo });
    expect(r.code).toBe(0);
    expect(Date.now() - t0).toBeLessThan(CLOSE_GRACE_MS + 10_000);
    // Killed with its group when the grace ran out.
    expect(await endsSoon(Number(readFileSync(join(repo, "pid"), "utf8")))).toBe(true);
  });

  it("gitResult and gitStream at their timeout: git, its shell and the child holding its stderr are all killed, the error names the subcommand", async () => {
    const repo = s.tmp("child-group-git-");
    // An alias runs under a shell git waits for; the backgrounded sleep holds git's stderr.
    const script = join(repo, "stuck.sh");
    writeFileSync(script, `#!/bin/sh\nsleep 30 >&2 &\necho "$$ $!" > "$1"\nexec sleep 30\n`, { mode: 0o755 });
    const alias = ["-c", `alias.stuck=!${script}`, "stuck"];
    let t0 = Date.now();
    await expect(gitResult([...alias, join(repo, "result.pid")], { cwd: repo, timeoutMs: 500 })).rejects.toThrow(
      /^git stuck did not finish within 500 ms$/,
    );
    expect(Date.now() - t0).toBeLessThan(CLOSE_GRACE_MS + 10_000);
    const stream = gitStream([...alias, join(repo, "stream.pid")], { cwd: repo, timeoutMs: 500 });
    stream.stdin.end();
    stream.stdout.resume();
    t0 = Date.now();
    await expect(stream.done).rejects.toThrow(/^git stuck did not finish within 500 ms$/);
    expect(Date.now() - t0).toBeLessThan(CLOSE_GRACE_MS + 10_000);
    for (const which of ["result.pid", "stream.pid"])
      for (const pid of readFileSync(join(repo, which), "utf8").trim().split(" ")) expect(await endsSoon(Number(pid)), which).toBe(true);
  });
});
