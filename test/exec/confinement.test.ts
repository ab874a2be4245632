// Which processes belong to a workspace (pause freezes them, destroy kills them, `processes`
// lists them), over the real sshd: exactly those its execs started. A process cannot hide by
// naming the agent directory in its argv (our helper runs from there and is a member too), and a
// process of the same user that merely has a workspace file open on the tag descriptor, or shares
// a session whose leader is gone with one, is not a member.
import { randomBytes } from "node:crypto";
import { readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ExecWorkspace, eventually, exitOf } from "../support/exec.js";
import { rig } from "../rig/rig.js";
import { needs, skipUnless } from "../support/needs.js";
import { onHost, requireView } from "../support/host-view.js";

/** Live host pids whose command line matches `pattern` (like pgrep -f). */
function pidsWith(pattern: string, argvIncludes?: string): number[] {
  const re = new RegExp(pattern);
  return requireView()
    .processes()
    .filter((p) => p.state !== "Z" && re.test(p.argv.join(" ")) && (!argvIncludes || p.argv.join("\0").includes(argvIncludes)))
    .map((p) => p.pid);
}

function stateOf(pid: number): string | null {
  return (
    requireView()
      .processes()
      .find((p) => p.pid === pid)?.state ?? null
  );
}

const gone = async (pids: number[]) =>
  eventually(
    () => pids.filter((p) => stateOf(p) !== null && stateOf(p) !== "Z"),
    (left) => left.length === 0,
    3000,
  );

describe("workspace process membership", () => {
  const made: ExecWorkspace[] = [];
  const strays: number[] = [];
  afterEach(async () => {
    for (const pid of strays.splice(0)) {
      try {
        requireView().kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    for (const ws of made.splice(0)) await ws.cleanup();
  });

  async function workspace(label: string): Promise<ExecWorkspace> {
    const ws = new ExecWorkspace(label);
    made.push(ws);
    await ws.create();
    return ws;
  }

  it("a workload naming <root>/agent/ in its argv is frozen by pause and killed by destroy", async () => {
    const ws = await workspace("confine-argv");
    const marker = `${ws.configuredRoot}/agent/hide-${randomBytes(4).toString("hex")}`;
    // $0 of the shell carries the agent directory: the loop itself must not be invisible.
    const h = ws.start({ argv: ["/bin/sh", "-c", "echo ready; while :; do sleep 0.2; done", marker], env: { PATH: "/usr/bin:/bin" } });
    await h.waitOutput("ready");
    const [pid] = pidsWith(marker);
    expect(pid).toBeDefined();
    expect((await ws.processes()).map((p) => p.pid)).toContain(pid);
    expect((await ws.lifecycle("pause")).code).toBe(0);
    expect(stateOf(pid!)).toBe("T");
    expect((await ws.lifecycle("destroy")).code).toBe(0);
    expect(await gone([pid!])).toEqual([]);
    expect(exitOf(await h.done)).toEqual({ code: null, signal: "SIGKILL" });
  });

  it("a running `paseo-workspace-helper watch` is a member: frozen by pause, killed by destroy", async () => {
    const ws = await workspace("confine-helper");
    const watch = ws.start({ argv: ["paseo-workspace-helper", "watch"], env: {}, purpose: "workspace-helper" }, { keepStdinOpen: true });
    await watch.waitEvent("started");
    const helper = await eventually(
      () => pidsWith(`${ws.configuredRoot}/agent/`, "helper.cjs\0watch"),
      (p) => p.length === 1,
      5000,
    );
    expect(helper).toHaveLength(1);
    expect((await ws.processes()).map((p) => p.pid)).toContain(helper[0]);
    expect((await ws.lifecycle("pause")).code).toBe(0);
    expect(stateOf(helper[0]!)).toBe("T");
    expect((await ws.lifecycle("destroy")).code).toBe(0);
    expect(await gone(helper)).toEqual([]);
    expect(exitOf(await watch.done)).toEqual({ code: null, signal: "SIGKILL" });
  });

  it("a process of the same user with a workspace file on descriptor 47, and its session sibling, are left alone", async () => {
    const ws = await workspace("confine-fd47");
    const file = join(ws.root, "a.txt");
    writeFileSync(onHost(file), "not a tag\n");
    const tag = `${4000 + Math.floor(Math.random() * 1000)}`;
    // A shell of the same user in a session of its own opens a checkout file on 47, starts two
    // jobs and exits: its session's leader is gone, one job holds the file on 47, its sibling
    // holds nothing.
    requireView().run(
      rig().user,
      [
        "setsid",
        "/bin/bash",
        "-c",
        `sleep ${tag}1 47<"$1" </dev/null >/dev/null 2>&1 & sleep ${tag}2 </dev/null >/dev/null 2>&1 & exit 0`,
        "bash",
        file,
      ],
      {
        cwd: "/",
        env: { PATH: "/usr/bin:/bin" },
      },
    );
    const both = await eventually(
      () => [...pidsWith(`^sleep ${tag}1$`), ...pidsWith(`^sleep ${tag}2$`)],
      (p) => p.length === 2,
      3000,
    );
    strays.push(...both);
    expect(both).toHaveLength(2);
    const holder = pidsWith(`^sleep ${tag}1$`)[0]!;
    // The host names the file by its own path; a canonical root has no links in it.
    expect(readlinkSync(`/proc/${requireView().localPid(holder)}/fd/47`)).toBe(file);
    expect((await ws.processes()).map((p) => p.pid).filter((p) => both.includes(p))).toEqual([]);
    expect((await ws.lifecycle("pause")).code).toBe(0);
    expect(both.map(stateOf)).toEqual(["S", "S"]);
    expect((await ws.lifecycle("resume")).code).toBe(0);
    expect((await ws.lifecycle("destroy")).code).toBe(0);
    expect(both.map(stateOf)).toEqual(["S", "S"]);
  });

  it("PTY: a descendant that closed descriptor 47 is found through the terminal's session (pty-attach itself is not a member)", async (ctx) => {
    skipUnless(ctx, needs.pty());
    const ws = await workspace("confine-pty");
    const tag = `${5000 + Math.floor(Math.random() * 1000)}`;
    const h = ws.start({
      argv: ["/bin/bash", "-c", `sleep ${tag} 47>&- </dev/null >/dev/null 2>&1 & echo ready; wait`],
      env: { PATH: "/usr/bin:/bin" },
      stdio: { kind: "pty", rows: 24, cols: 80 },
    });
    await h.waitOutput("ready");
    const [untagged] = await eventually(
      () => pidsWith(`^sleep ${tag}$`),
      (p) => p.length === 1,
      3000,
    );
    expect(untagged).toBeDefined();
    const members = await ws.processes();
    expect(members.map((p) => p.pid)).toContain(untagged);
    expect(members.some((p) => p.command.includes("pty-attach"))).toBe(false);
    expect((await ws.lifecycle("pause")).code).toBe(0);
    expect(stateOf(untagged!)).toBe("T");
    expect((await ws.lifecycle("destroy")).code).toBe(0);
    expect(await gone([untagged!])).toEqual([]);
    expect(exitOf(await h.done)).toEqual({ code: null, signal: "SIGKILL" });
  });
});
