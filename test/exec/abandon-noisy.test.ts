// PTY abandonment (docs/contract.md#scenarios S2) and immunity to noisy login shells (S4) for
// exec, over the real sshd.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import { ExecWorkspace, eventually, exitOf, sleep } from "../support/exec.js";
import { execRecordPath, readRecordFile } from "../../src/remote-agent/exec/records.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { rig } from "../rig/rig.js";
import { needs, skipUnless } from "../support/needs.js";
import { onHost } from "../support/host-view.js";

const pty = { kind: "pty" as const, rows: 24, cols: 80 };

describe("PTY wrapper death", () => {
  const ws = new ExecWorkspace("exec-abandon");
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("S2 (PTY): a SIGKILLed wrapper leaves no remote process; the exec is recorded abandoned", async (ctx) => {
    skipUnless(ctx, needs.pty());
    const h = ws.start({ argv: ["/bin/sh", "-c", "trap '' HUP; sleep 33 & echo ready; wait"], env: { PATH: "/usr/bin:/bin" }, stdio: pty });
    await h.waitOutput("ready");
    expect((await ws.processes()).some((p) => p.command.includes("sleep 33"))).toBe(true);
    process.kill(-h.child.pid!, "SIGKILL");
    const left = await eventually(
      () => ws.processes(),
      (p) => p.length === 0,
      6000,
    );
    expect(left).toEqual([]);
    const path = onHost(execRecordPath(workspaceLayout(ws.configuredRoot, ws.workspaceId), h.execId));
    const rec = await eventually(
      () => readRecordFile(path),
      (r) => r?.state === "abandoned" && r.reaped === true,
      5000,
    );
    expect(rec).toMatchObject({ state: "abandoned", reaped: true });
    expect((await ws.signal(h.execId, "SIGKILL")).code).toBe(0);
  });
});

describe("destroy during a running exec", () => {
  const ws = new ExecWorkspace("exec-destroy");
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("kills the workload (reported as SIGKILL) and leaves no directory behind", async () => {
    const h = ws.start({ argv: ["/bin/sh", "-c", "echo ready; exec sleep 34"], env: { PATH: "/usr/bin:/bin" } });
    await h.waitOutput("ready");
    const destroyed = await ws.lifecycle("destroy");
    expect(destroyed.stderr).toBe("");
    expect(destroyed.code).toBe(0);
    expect(exitOf(await h.done)).toEqual({ code: null, signal: "SIGKILL" });
    await sleep(300);
    expect(existsSync(onHost(workspaceLayout(ws.configuredRoot, ws.workspaceId).dir))).toBe(false);
    expect(await ws.processes()).toEqual([]);
  });
});

describe("descendants that close the tag descriptor", () => {
  const ws = new ExecWorkspace("exec-untagged");
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("stay in the process set through their recorded session: paused, then killed by destroy", async () => {
    // The shell drops descriptor 47 before starting the child, then exits: no tagged process is left.
    const r = await ws.run({
      argv: ["/bin/bash", "-c", "exec 47>&-; sleep 38 </dev/null >/dev/null 2>&1 &"],
      env: { PATH: "/usr/bin:/bin" },
    });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    const procs = await ws.processes();
    expect(procs.filter((p) => p.command.includes("sleep 38")).length).toBe(1);
    expect((await ws.lifecycle("pause")).code).toBe(0);
    expect((await ws.processes()).filter((p) => p.command.includes("sleep 38")).map((p) => p.state)).toEqual(["T"]);
    expect((await ws.lifecycle("destroy")).code).toBe(0);
    expect(await ws.processes()).toEqual([]);
  });
});

describe("noisy login shell", () => {
  const r = rig();
  const ws = new ExecWorkspace("exec-noisy", r.noisyUser ? { user: r.noisyUser } : {});
  beforeAll(async () => {
    if (r.noisyUser) await ws.create();
  });
  afterAll(() => ws.cleanup());

  it("S4: rc-file output and exports never reach the workload or fd1 (pipes and PTY)", async (ctx) => {
    if (!r.noisyUser) return ctx.skip(r.noisyUserSkipReason ?? "no noisy user");
    const pipes = await ws.run({ argv: ["/usr/bin/env"], env: { RUNTIME_EXACT_ENV: "docker" } });
    expect(exitOf(pipes)).toEqual({ code: 0, signal: null });
    expect(pipes.stdout.toString()).toBe("RUNTIME_EXACT_ENV=docker\n");
    const term = await ws.run({ argv: ["/usr/bin/env"], env: { RUNTIME_EXACT_ENV: "docker" }, stdio: pty });
    expect(exitOf(term)).toEqual({ code: 0, signal: null });
    expect(term.stdout.toString()).toBe("RUNTIME_EXACT_ENV=docker\r\n");
  });
});
