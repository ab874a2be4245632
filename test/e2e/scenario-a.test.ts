// Scenario A (docs/contract.md#scenarios A1–A28) end to end, in order, in one workspace: every step goes through
// the built runtime executable the way Paseo drives it (src/demo/runtime-driver.ts: a process per
// operation, exec with five pipes, fd4 decoded by the phase machine) against the real sshd rig.
// Run `npm run build` first. Steps A3, A7 (watch), A24 and A27 are proven by other suites.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execWorkload, runWorkload, spawnOp, type RuntimeCommand, type SpawnEnvelope } from "../../src/demo/runtime-driver.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { newExecId } from "../support/exec.js";
import { gitIn, LARGE_BIN_SIZE, seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { rig, rigOptions, waitFor } from "../rig/rig.js";
import { CLI_PATH } from "../support/run-cli.js";
import { absoluteRoot, suiteRoot } from "../support/workspace.js";
import { needs, unless } from "../support/needs.js";
import { onHost, requireView } from "../support/host-view.js";

const PATH = "/usr/local/bin:/usr/bin:/bin";
const SIZE_PROBE =
  "process.stdin.setEncoding('utf8');process.stdout.write(`${process.cwd()}|${process.stdout.isTTY}|${process.stdout.columns}x${process.stdout.rows}|λ`);process.stdin.once('data',data=>{process.stdout.write(`|${data.trim()}|${process.stdout.columns}x${process.stdout.rows}`);process.exit(6)})";

const root = suiteRoot("e2e-a");
const options = rigOptions({ root }) as Record<string, string | number>;
const workspaceId = `scenario-a-${randomBytes(6).toString("hex")}`;
const runtimeInstanceId = randomBytes(32).toString("hex");
// A Paseo-host variable that must never reach a workload (A4).
const cmd: RuntimeCommand = {
  argv: [process.execPath, CLI_PATH],
  env: { ...process.env, PASEO_SETUP_CUSTOM_INHERITED: "leak" },
  id: "ssh",
};
const request = { protocolVersion: 1 as const, runtimeInstanceId, options };

async function lifecycle(op: string, extra: object = {}): Promise<Record<string, any>> {
  return (await spawnOp(cmd, op, { "workspace-id": workspaceId }, { ...request, ...extra })).response as Record<string, any>;
}
const inspection = async () => (await lifecycle("inspect")).inspection as Record<string, any>;

// Paseo's envelope defaults for a terminal run; each step overrides what it needs.
const spawnDefaults = {
  type: "spawn",
  protocolVersion: 1,
  runtimeInstanceId,
  options,
  purpose: { kind: "terminal" },
  stdio: { kind: "pipes" },
} as const;
const envelope = (argv: string[], env: Record<string, string>, extra: Partial<SpawnEnvelope> = {}): SpawnEnvelope => ({
  ...spawnDefaults,
  argv,
  env,
  execId: newExecId(),
  ...extra,
});
const run = (argv: string[], env: Record<string, string> = {}, extra: Partial<SpawnEnvelope> = {}, input = "") =>
  runWorkload(cmd, workspaceId, envelope(argv, env, extra), input);
const git = (args: string[]) => run(["git", ...args], { PATH }, { purpose: { kind: "git" } });
// Paseo launches the helper by its bare name with env {} (docs/contract.md#helper).
const helper = (args: string[], input = "") =>
  run(["paseo-workspace-helper", ...args], {}, { purpose: { kind: "workspace-helper" } }, input);
const text = (b: Buffer) => b.toString("utf8");
const ok = { code: 0, signal: null };

/** Command lines of the host's processes whose cwd is inside the workspace dir. */
function processesIn(dir: string): string[] {
  return requireView()
    .processes()
    .filter((p) => p.cwd?.startsWith(dir))
    .map((p) => p.argv.join(" ").trim());
}
const sleepers = (dir: string) => processesIn(dir).filter((c) => c.includes("sleep 30"));

const onThisHost = unless(needs.localHost("looks at the checkout on the host"));

describe("scenario A: materialization, pipes, files, git, PTY, lifecycle", rig().container ? {} : onThisHost, () => {
  let repo: FixtureRepo;
  let cwd = "";
  let staleRevision = "";
  const dir = () => workspaceLayout(root, workspaceId).dir;

  beforeAll(() => {
    repo = seedRepo();
  });
  afterAll(async () => {
    // Destroy is idempotent (A28 may already have run); the fixture and the suite root go too.
    await lifecycle("destroy").catch(() => undefined);
    if (repo) rmSync(dirname(repo.path), { recursive: true, force: true });
    rmSync(onHost(absoluteRoot(root)), { recursive: true, force: true });
  }, 30_000);

  it("A1 create materializes fresh content at a predictable root; A2 inspect is ready", async () => {
    const { stdout } = await spawnOp(
      cmd,
      "create",
      { "workspace-id": workspaceId },
      {
        ...request,
        input: {
          workspaceId,
          project: { projectId: "scenario-a", source: { kind: "directory", path: repo.path } },
          placement: { kind: "existing" },
        },
      },
    );
    expect(stdout).toContain('"materializedFreshContent":true');
    const response = JSON.parse(stdout) as Record<string, any>;
    expect(response.type).toBe("state");
    expect(response.state.lifecycle).toBe("ready");
    expect(response.state.lifecycleEnvironment).toEqual({
      PASEO_SOURCE_CHECKOUT_PATH: ".",
      PASEO_ROOT_PATH: ".",
      PASEO_WORKTREE_PATH: ".",
      PASEO_BRANCH_NAME: "main",
    });
    cwd = response.placement.cwd;
    // Stable and predictable from the options' root and the workspace id.
    expect(cwd).toBe(workspaceLayout(root, workspaceId).checkout);
    expect(response.placement.hostVisiblePath).toBeUndefined();
    const seen = await inspection();
    expect(seen).toMatchObject({ status: "ready", placement: { cwd }, state: { workspaceId, lifecycle: "ready" } });
  });

  it("A4 a setup run sees exactly Paseo's merged env, nothing from sshd or a login shell", async () => {
    // Paseo merges the published lifecycleEnvironment and the setup port into the envelope env (docs/contract.md#lifecycle).
    const published = (await inspection()).state.lifecycleEnvironment as Record<string, string>;
    expect(Object.keys(published).sort()).toEqual([
      "PASEO_BRANCH_NAME",
      "PASEO_ROOT_PATH",
      "PASEO_SOURCE_CHECKOUT_PATH",
      "PASEO_WORKTREE_PATH",
    ]);
    const env = { ...published, PASEO_WORKTREE_PORT: "41234" };
    const r = await run(["/usr/bin/env"], env, { purpose: { kind: "setup" } });
    expect({ code: r.code, signal: r.signal }).toEqual(ok);
    const printed = text(r.stdout).split("\n").filter(Boolean).sort();
    expect(printed).toEqual(
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}`)
        .sort(),
    );
  });

  it("A5 git config runs succeed", async () => {
    for (const args of [
      ["config", "user.email", "test@example.com"],
      ["config", "user.name", "Paseo Test"],
    ]) {
      const r = await git(args);
      expect({ code: r.code, signal: r.signal, stderr: text(r.stderr) }).toEqual({ ...ok, stderr: "" });
    }
  });

  it("A6 helper fs-list and fs-stat with env {}", async () => {
    const list = await helper(["fs-list", "--path", "."]);
    expect({ code: list.code, signal: list.signal }).toEqual(ok);
    const names = (JSON.parse(text(list.stdout)) as { entries: Array<{ name: string }> }).entries.map((e) => e.name);
    expect(names).toContain("committed.txt");
    expect(names).not.toContain(".env");
    const stat = await helper(["fs-stat", "--path", "committed.txt"]);
    expect({ code: stat.code, signal: stat.signal }).toEqual(ok);
    const info = JSON.parse(text(stat.stdout)) as { status: string; size: number; revision: string };
    expect({ status: info.status, size: info.size }).toEqual({ status: "ready", size: 10 });
    staleRevision = info.revision;
  });

  it("A7 a workload rewrites committed.txt", async () => {
    const r = await run(["/bin/sh", "-c", "printf container-change > committed.txt"]);
    expect({ code: r.code, signal: r.signal }).toEqual(ok);
  });

  it("A8 git sees a dirty main; A9 commit, branch, switch and fetch succeed", async () => {
    const branch = await git(["rev-parse", "--abbrev-ref", "HEAD"]);
    expect(text(branch.stdout)).toBe("main\n");
    expect(text((await git(["status", "--porcelain"])).stdout)).toBe(" M committed.txt\n");
    expect(text((await git(["diff"])).stdout)).toContain("+container-change");
    for (const args of [
      ["add", "-A"],
      ["commit", "-q", "-m", "container change"],
      ["branch", "container-branch", "main"],
      ["switch", "-q", "main"],
      ["fetch"],
    ]) {
      const r = await git(args);
      expect({ args, code: r.code, signal: r.signal, stderr: text(r.stderr) }).toMatchObject({ args, ...ok });
    }
    expect(text((await git(["status", "--porcelain"])).stdout)).toBe("");
    expect(text((await git(["symbolic-ref", "HEAD"])).stdout)).toBe("refs/heads/main\n");
    expect(text((await git(["branch", "--list", "container-branch"])).stdout)).toBe("  container-branch\n");
  });

  it("A10 the Paseo-host file is unchanged; A11 helper fs-read returns the remote content", async () => {
    expect(readFileSync(join(repo.path, "committed.txt"), "utf8")).toBe("committed\n");
    const read = await helper(["fs-read", "--path", "committed.txt"]);
    expect({ code: read.code, signal: read.signal }).toEqual(ok);
    expect(text(read.stdout)).toBe("container-change");
  });

  it("A12 fs-write with the stale revision from A6 is a conflict", async () => {
    const w = await helper(["fs-write", "--path", "committed.txt", "--expected-revision", staleRevision], "stale");
    expect({ code: w.code, signal: w.signal }).toEqual(ok);
    const answer = JSON.parse(text(w.stdout)) as { status: string; version: { status: string; revision: string } };
    expect(answer.status).toBe("conflict");
    expect(answer.version.status).toBe("ready");
    expect(answer.version.revision).not.toBe(staleRevision);
    expect(text((await helper(["fs-read", "--path", "committed.txt"])).stdout)).toBe("container-change");
  });

  it("A13 large.bin arrives byte for byte; A14 the outside symlink is refused", async () => {
    const big = await helper(["fs-read", "--path", "large.bin"]);
    expect({ code: big.code, signal: big.signal }).toEqual(ok);
    expect(big.stdout.length).toBe(LARGE_BIN_SIZE);
    expect(big.stdout.equals(Buffer.alloc(LARGE_BIN_SIZE, 0xa5))).toBe(true);
    const link = await run(["/bin/sh", "-c", "test -L outside-link && readlink outside-link && test -x fixture-agent.mjs"]);
    expect({ code: link.code, out: text(link.stdout) }).toEqual({ code: 0, out: "/etc/passwd\n" });
    const outside = await helper(["fs-read", "--path", "outside-link"]);
    expect({ code: outside.code, signal: outside.signal }).toEqual({ code: 1, signal: null });
    expect(text(outside.stderr)).toBe("Access outside of workspace is not allowed\n");
    expect(outside.stdout.length).toBe(0);
  });

  it("A15 pipes carry stdin, stderr and the exit code", async () => {
    const r = await run(["/bin/sh", "-c", "cat > runtime-owned.txt; printf runtime-stderr >&2; exit 19"], {}, {}, "docker-state");
    expect({ code: r.code, signal: r.signal, stderr: text(r.stderr), stdout: text(r.stdout) }).toEqual({
      code: 19,
      signal: null,
      stderr: "runtime-stderr",
      stdout: "",
    });
  });

  it("A16 the workload env is exactly the envelope env", async () => {
    const r = await run(["/usr/bin/env"], { RUNTIME_EXACT_ENV: "docker" });
    expect({ code: r.code, signal: r.signal, stdout: text(r.stdout) }).toEqual({ ...ok, stdout: "RUNTIME_EXACT_ENV=docker\n" });
  });

  it("A17 pause refuses exec and inspects paused; A18 a fresh process resumes from the remote state", async () => {
    expect((await lifecycle("pause")).type).toBe("ok");
    expect(await inspection()).toMatchObject({ status: "paused", placement: { cwd }, state: { lifecycle: "paused" } });
    const refused = await run(["/bin/true"]).then(
      () => "ran",
      (e: Error) => e.message,
    );
    expect(refused).toContain(`SSH workspace is paused: ${workspaceId}`);
    const resumed = await lifecycle("resume");
    expect(resumed.type).toBe("state");
    expect(resumed.state.lifecycle).toBe("ready");
    expect(resumed.materializedFreshContent).toBeUndefined();
    expect(await inspection()).toMatchObject({ status: "ready", placement: { cwd } });
  });

  it("A19 a cwd escaping the root is refused before launch, with no process event", async () => {
    const handle = execWorkload(cmd, workspaceId, envelope(["/bin/true"], {}, { cwd: "../escape" }));
    handle.stdin.end();
    const message = await handle.exited.then(
      () => "ran",
      (e: Error) => e.message,
    );
    expect(message).toContain("Workspace cwd escapes its runtime root");
    expect(text(handle.stderr())).toContain("Workspace cwd escapes its runtime root");
    expect(handle.events().filter((e) => e.type !== "error")).toEqual([]);
  });

  it("A20 content survived pause and resume", async () => {
    const r = await run(["/bin/cat", "runtime-owned.txt"]);
    expect({ code: r.code, signal: r.signal, stdout: text(r.stdout) }).toEqual({ ...ok, stdout: "docker-state" });
  });

  describe("PTY", unless(needs.pty()), () => {
    it("A21 the size probe sees the initial size, a resize and raw UTF-8", async () => {
      const node = rig().remoteNode;
      const handle = execWorkload(
        cmd,
        workspaceId,
        envelope([node, "-e", SIZE_PROBE], { PATH }, { stdio: { kind: "pty", rows: 24, cols: 80 } }),
      );
      await waitFor(() => text(handle.stdout()).includes(`${cwd}|true|80x24|λ`), 10_000);
      await handle.resize(39, 103);
      handle.stdin.write("héllo\n");
      expect(await handle.exited).toEqual({ code: 6, signal: null });
      expect(text(handle.stdout())).toContain("|héllo|103x39");
    });

    for (const signal of ["SIGTERM", "SIGKILL"] as const) {
      it(`A22/A23 a PTY sleep ends by ${signal} and leaves no process`, async () => {
        const handle = execWorkload(
          cmd,
          workspaceId,
          envelope(["/bin/sleep", "30"], { PATH: "/usr/bin:/bin" }, { stdio: { kind: "pty", rows: 24, cols: 80 } }),
        );
        await Promise.race([handle.started, handle.exited]);
        await waitFor(() => sleepers(dir()).length > 0, 5_000);
        handle.kill(signal);
        expect(await handle.exited).toEqual({ code: null, signal });
        await waitFor(() => sleepers(dir()).length === 0, 3_000);
      });
    }
  });

  it("A25 only committed content reached the remote; the host repo is untouched", async () => {
    const r = await run(["/bin/sh", "-c", "test ! -e .env"]);
    expect({ code: r.code, signal: r.signal }).toEqual(ok);
    expect(gitIn(repo.path, ["status", "--short"])).toBe("?? .env\n");
  });

  it("A26 SIGTERM reaches the whole process group of a pipes run in under 5 s", async () => {
    const handle = execWorkload(cmd, workspaceId, envelope(["/bin/sh", "-c", "sleep 30 & echo ready; wait"], { PATH: "/usr/bin:/bin" }));
    await waitFor(() => text(handle.stdout()) === "ready\n", 10_000);
    const started = performance.now();
    handle.kill("SIGTERM");
    expect(await handle.exited).toEqual({ code: null, signal: "SIGTERM" });
    expect(performance.now() - started).toBeLessThan(5_000);
    await waitFor(() => sleepers(dir()).length === 0, 3_000);
  });

  it("A28 destroy removes the workspace; inspect is missing and exec is refused", async () => {
    expect((await lifecycle("destroy")).type).toBe("ok");
    expect(existsSync(onHost(dir()))).toBe(false);
    expect((await inspection()).status).toBe("missing");
    expect(existsSync(join(repo.path, "runtime-owned.txt"))).toBe(false);
    const refused = await run(["/bin/true"]).then(
      () => "ran",
      (e: Error) => e.message,
    );
    expect(refused).toContain(workspaceId);
  });
});
