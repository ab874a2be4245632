// Pause, resume, release-backing, merge-to-base and interrupted creates through the built CLI over
// the real sshd: state lives in the remote manifest, responses are exact canonical bytes, and a
// runtime killed mid-create leaves nothing that destroy (or the agent itself) does not clean.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { commitAll, gitIn, seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { lifecycleRequest } from "../support/run-cli.js";
import { cliDriver, dirInput, gitAsRemoteUser, startCli, type Driver, removeRoot } from "../support/workspace.js";
import { releaseWorkspaceHooks, setWorkspaceHooks } from "../support/test-hooks.js";
import { onHost } from "../support/host-view.js";

const OK_LINE = '{"type":"ok","protocolVersion":1}\n';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("pause, resume and the extras over SSH", () => {
  const s = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  let d: Driver;

  beforeAll(() => {
    base = s.tmp("paseo-ws-life-");
    fixture = seedRepo(base);
    d = cliDriver("life");
    s.push(() => removeRoot(d.root));
  });

  it("pause and resume are durable and idempotent; create on a paused workspace reports it paused", async () => {
    const created = await d.create(dirInput("life-a", fixture.path));
    expect(created.ok).toBe(true);
    const pause = await d.op("pause", "life-a");
    expect(pause.stdout).toBe(OK_LINE);
    expect((await d.op("pause", "life-a")).stdout).toBe(OK_LINE);
    const manifest = JSON.parse(readFileSync(onHost(workspaceLayout(d.root, "life-a").manifest), "utf8")) as { phase: string };
    expect(manifest.phase).toBe("paused");
    expect((await d.inspect("life-a")).value?.inspection).toMatchObject({ status: "paused", state: { lifecycle: "paused" } });
    const again = await d.create(dirInput("life-a", fixture.path));
    expect(again.value).toMatchObject({ state: { lifecycle: "paused" }, materializedFreshContent: false });

    const resumed = await d.op("resume", "life-a");
    expect(resumed.ok).toBe(true);
    expect(resumed.stdout).not.toContain("materializedFreshContent");
    expect(JSON.parse(resumed.stdout)).toEqual({
      type: "state",
      protocolVersion: 1,
      state: created.value!.state,
      placement: created.value!.placement,
    });
    expect((await d.op("resume", "life-a")).ok).toBe(true);
    expect((await d.inspect("life-a")).value?.inspection.status).toBe("ready");
  });

  it("pause of a missing workspace is ok; resume of one fails with the fixed text", async () => {
    expect((await d.op("pause", "life-none")).stdout).toBe(OK_LINE);
    const r = await d.op("resume", "life-none");
    expect(r.ok).toBe(false);
    expect(r.message).toBe("SSH workspace is missing: life-none");
    expect(r.stdout).toBe("");
  });

  it("release-backing refuses a ready workspace, removes a paused one, and is idempotent", async () => {
    const refused = await d.op("release-backing", "life-a");
    expect(refused.ok).toBe(false);
    expect(refused.message).toBe("SSH workspace is ready; pause it before releasing its backing: life-a");
    expect(existsSync(onHost(workspaceLayout(d.root, "life-a").checkout))).toBe(true);
    expect((await d.op("pause", "life-a")).ok).toBe(true);
    expect((await d.op("release-backing", "life-a")).stdout).toBe(OK_LINE);
    expect(existsSync(onHost(workspaceLayout(d.root, "life-a").dir))).toBe(false);
    expect((await d.inspect("life-a")).value?.inspection).toEqual({ status: "missing" });
    expect((await d.op("release-backing", "life-a")).stdout).toBe(OK_LINE);
  });

  it("merge-to-base brings committed work back and fast-forwards the base branch; refuses a diverged base", async () => {
    expect((await d.create(dirInput("life-m", fixture.path))).ok).toBe(true);
    const checkout = workspaceLayout(d.root, "life-m").checkout;
    writeFileSync(onHost(join(checkout, "committed.txt")), "merged from the workspace\n");
    gitAsRemoteUser(checkout, ["commit", "-q", "-am", "workspace work"]);
    const head = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();

    const r = await d.op("merge-to-base", "life-m");
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe(`{"type":"merge-to-base","protocolVersion":1,"localIntegrationTarget":${JSON.stringify(fixture.path)}}\n`);
    expect(gitIn(fixture.path, ["rev-parse", "main"]).trim()).toBe(head);
    expect(readFileSync(join(fixture.path, "committed.txt"), "utf8")).toBe("merged from the workspace\n");
    expect(gitIn(fixture.path, ["status", "--short"])).toBe("?? .env\n");
    // Idempotent: nothing new to integrate.
    expect((await d.op("merge-to-base", "life-m")).ok).toBe(true);

    // The base moves on locally while the workspace commits again: no silent merge.
    writeFileSync(join(fixture.path, "local.txt"), "local\n");
    const local = commitAll(fixture.path, "local work");
    writeFileSync(onHost(join(checkout, "committed.txt")), "second\n");
    gitAsRemoteUser(checkout, ["commit", "-q", "-am", "more workspace work"]);
    const refused = await d.op("merge-to-base", "life-m");
    expect(refused.ok).toBe(false);
    expect(refused.message).toBe(
      `merge-to-base needs a fast-forward: main in ${fixture.path} has commits the workspace lacks; merge or rebase them in the workspace first`,
    );
    expect(gitIn(fixture.path, ["rev-parse", "main"]).trim()).toBe(local);

    expect((await d.op("pause", "life-m")).ok).toBe(true);
    expect((await d.op("merge-to-base", "life-m")).message).toBe("SSH workspace is paused: life-m");
    expect((await d.op("merge-to-base", "life-none")).message).toBe("SSH workspace is missing: life-none");
    expect((await d.op("destroy", "life-m")).ok).toBe(true);
  });

  it("a runtime killed mid-create: inspect says incomplete, destroy cleans; unattended, the agent rolls back", async () => {
    const killDuringClaim = async (id: string) => {
      setWorkspaceHooks(d.root, id, { afterClaimMs: 60_000 });
      const run = startCli(["create", "--workspace-id", id], lifecycleRequest(d.options, { input: dirInput(id, fixture.path) }));
      const lock = join(workspaceLayout(d.root, id).dir, "create.lock");
      for (let i = 0; i < 500 && !existsSync(onHost(lock)); i++) await sleep(20);
      expect(existsSync(onHost(lock))).toBe(true);
      run.child.kill("SIGKILL");
      await run.done;
    };

    await killDuringClaim("kill-a");
    expect((await d.inspect("kill-a")).value?.inspection).toEqual({ status: "error", message: "SSH workspace is incomplete: kill-a" });
    expect((await d.op("destroy", "kill-a")).stdout).toBe(OK_LINE);
    expect(existsSync(onHost(workspaceLayout(d.root, "kill-a").dir))).toBe(false);
    releaseWorkspaceHooks(d.root, "kill-a");

    // Released, kill-b's agent finds nobody listening and rolls its claim back by itself.
    await killDuringClaim("kill-b");
    releaseWorkspaceHooks(d.root, "kill-b");
    const killB = workspaceLayout(d.root, "kill-b").dir;
    for (let i = 0; i < 1500 && existsSync(onHost(killB)); i++) await sleep(20);
    expect(existsSync(onHost(killB))).toBe(false);
    expect((await d.inspect("kill-b")).value?.inspection).toEqual({ status: "missing" });
    // kill-a's agent finished its hook meanwhile and must not have resurrected anything.
    expect(existsSync(onHost(workspaceLayout(d.root, "kill-a").dir))).toBe(false);
  });
});
