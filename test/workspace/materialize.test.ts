// Scenario A's materialization (docs/contract.md#scenarios A1, A2, A9, A10, A25, A28) and E4 over the
// real sshd: only committed content reaches the host, the checkout is a real repository on the
// branch, a second workspace ships no objects and a new commit ships only its delta.
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { commitAll, gitIn, LARGE_BIN_SIZE, localRepoFingerprint, seedRepo, treeSnapshot, type FixtureRepo } from "../fixtures/repo.js";
import { bytesSent, dirInput, gitAsRemoteUser, progressLines, cliDriver, type Driver, removeRoot } from "../support/workspace.js";
import { hostGit, onHost } from "../support/host-view.js";

const PROGRESS = { PASEO_SSH_PROGRESS: "1" };

describe("directory source materialization over SSH", () => {
  const s = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  let d: Driver;

  beforeAll(() => {
    base = s.tmp("paseo-ws-mat-");
    fixture = seedRepo(base);
    d = cliDriver("mat");
    s.push(() => removeRoot(d.root));
  });

  it("A1/A2/A9/A25: creates a clean checkout on main with committed content only", async () => {
    const before = localRepoFingerprint(fixture.path);
    const gitDirBefore = treeSnapshot(join(fixture.path, ".git"));
    const t0 = Date.now();
    const r = await d.create(dirInput("mat-a", fixture.path), { env: PROGRESS });
    const ms = Date.now() - t0;
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, "mat-a").checkout;
    expect(r.value).toEqual({
      type: "state",
      protocolVersion: 1,
      state: {
        workspaceId: "mat-a",
        lifecycle: "ready",
        lifecycleEnvironment: {
          PASEO_SOURCE_CHECKOUT_PATH: ".",
          PASEO_ROOT_PATH: ".",
          PASEO_WORKTREE_PATH: ".",
          PASEO_BRANCH_NAME: "main",
        },
      },
      placement: { cwd: checkout },
      materializedFreshContent: true,
    });
    expect(JSON.stringify(r.value)).not.toMatch(/root|revision|executionDomainId/);
    // A real repository on branch main, clean, with origin usable for fetch.
    expect(hostGit(checkout, ["symbolic-ref", "--short", "HEAD"]).trim()).toBe("main");
    expect(hostGit(checkout, ["rev-parse", "HEAD"]).trim()).toBe(fixture.commit);
    expect(hostGit(checkout, ["status", "--porcelain"])).toBe("");
    expect(existsSync(onHost(join(checkout, ".env")))).toBe(false);
    expect(readFileSync(onHost(join(checkout, "committed.txt")), "utf8")).toBe("committed\n");
    expect(readFileSync(onHost(join(checkout, "large.bin"))).equals(Buffer.alloc(LARGE_BIN_SIZE, 0xa5))).toBe(true);
    expect(lstatSync(onHost(join(checkout, "outside-link"))).isSymbolicLink()).toBe(true);
    expect(readlinkSync(onHost(join(checkout, "outside-link")))).toBe("/etc/passwd");
    expect(statSync(onHost(join(checkout, "fixture-agent.mjs"))).mode & 0o111).toBe(
      0o111 & statSync(join(fixture.path, "fixture-agent.mjs")).mode,
    );
    // No identity was configured for the workspace (A5 sets its own).
    expect(() => hostGit(checkout, ["config", "--local", "user.email"])).toThrow();
    // The Paseo-host repository is untouched: not one file of .git changed (not even the index),
    // no refs, no config, status exactly `?? .env`.
    expect(treeSnapshot(join(fixture.path, ".git"))).toBe(gitDirBefore);
    expect(localRepoFingerprint(fixture.path)).toEqual(before);
    expect(gitIn(fixture.path, ["status", "--short"])).toBe("?? .env\n");
    // Progress went to stderr as JSON lines, in phase order.
    expect(progressLines(r.stderr).map((p) => p.phase)).toEqual(["connect", "negotiate", "objects-sent", "checkout", "done"]);
    console.log(`create of the fixture: ${ms} ms, ${bytesSent(r.stderr)} object bytes sent`);

    const i = await d.inspect("mat-a");
    expect(i.value).toEqual({
      type: "inspection",
      protocolVersion: 1,
      inspection: { status: "ready", state: r.value!.state, placement: { cwd: checkout } },
    });
  });

  it("A5/A9: the checkout behaves as a normal repository for the remote user (config, commit, branch, switch, fetch)", async () => {
    const checkout = workspaceLayout(d.root, "mat-a").checkout;
    const git = (...args: string[]) => gitAsRemoteUser(checkout, args);
    git("config", "user.email", "test@example.com");
    git("config", "user.name", "Paseo Test");
    writeFileSync(onHost(join(checkout, "committed.txt")), "container-change");
    git("add", "-A");
    git("commit", "-q", "-m", "container change");
    git("branch", "container-branch", "main");
    git("switch", "-q", "container-branch");
    git("switch", "-q", "main");
    expect(git("fetch")).toBe("");
    expect(git("status", "--porcelain")).toBe("");
    expect(git("symbolic-ref", "--short", "HEAD").trim()).toBe("main");
    // The Paseo-host repository's files saw none of it. The branch the workspace made may already
    // be there as a branch of its own (the live mirror, test/mirror/), at the host's commit.
    expect(readFileSync(join(fixture.path, "committed.txt"), "utf8")).toBe("committed\n");
    expect(gitIn(fixture.path, ["symbolic-ref", "--short", "HEAD"]).trim()).toBe("main");
    if (gitIn(fixture.path, ["branch", "--list", "container-branch"]) !== "") {
      expect(gitIn(fixture.path, ["rev-parse", "container-branch"]).trim()).toBe(git("rev-parse", "container-branch").trim());
    }
  });

  it("creating an existing workspace returns its state with materializedFreshContent false", async () => {
    const r = await d.create(dirInput("mat-a", fixture.path), { env: PROGRESS });
    expect(r.value?.materializedFreshContent).toBe(false);
    expect(r.value?.state.lifecycle).toBe("ready");
  });

  it("a second workspace of the same commit sends no objects; a new commit sends only its delta (E4)", async () => {
    const first = await d.create(dirInput("mat-b", fixture.path), { env: PROGRESS });
    expect(first.value?.materializedFreshContent).toBe(true);
    expect(bytesSent(first.stderr)).toBe(0);
    expect(progressLines(first.stderr).map((p) => p.phase)).toEqual(["connect", "negotiate", "objects-sent", "checkout", "done"]);

    expect((await d.op("destroy", "mat-a")).ok).toBe(true);
    expect(existsSync(onHost(workspaceLayout(d.root, "mat-a").dir))).toBe(false);
    writeFileSync(join(fixture.path, "committed.txt"), "v2\n");
    const v2 = commitAll(fixture.path, "v2");
    const again = await d.create(dirInput("mat-a", fixture.path), { env: PROGRESS });
    expect(again.value?.materializedFreshContent).toBe(true);
    const delta = bytesSent(again.stderr);
    const full = execFileSync("git", ["pack-objects", "--revs", "--stdout", "-q"], { cwd: fixture.path, input: "HEAD\n" }).length;
    expect(delta).toBeGreaterThan(0);
    expect(delta).toBeLessThan(full);
    console.log(`delta after one commit: ${delta} bytes (a full pack of HEAD is ${full})`);
    expect(hostGit(workspaceLayout(d.root, "mat-a").checkout, ["rev-parse", "HEAD"]).trim()).toBe(v2);
    expect(readFileSync(onHost(join(workspaceLayout(d.root, "mat-a").checkout, "committed.txt")), "utf8")).toBe("v2\n");
    expect(readFileSync(onHost(join(workspaceLayout(d.root, "mat-b").checkout, "committed.txt")), "utf8")).toBe("committed\n");
  });

  it("A10/A28: remote changes never reach the host repo; destroy removes the directory and is idempotent", async () => {
    const checkout = workspaceLayout(d.root, "mat-b").checkout;
    writeFileSync(onHost(join(checkout, "runtime-owned.txt")), "x");
    writeFileSync(onHost(join(checkout, "committed.txt")), "container-change");
    expect((await d.op("destroy", "mat-b")).ok).toBe(true);
    expect((await d.op("destroy", "mat-b")).ok).toBe(true);
    expect(existsSync(onHost(workspaceLayout(d.root, "mat-b").dir))).toBe(false);
    expect(existsSync(join(fixture.path, "runtime-owned.txt"))).toBe(false);
    expect(readFileSync(join(fixture.path, "committed.txt"), "utf8")).toBe("v2\n");
    expect((await d.inspect("mat-b")).value?.inspection).toEqual({ status: "missing" });
    expect((await d.op("destroy", "mat-a")).ok).toBe(true);
  });

  it("a discovery workspace has the same environment", async () => {
    const r = await d.create(dirInput("mat-probe", fixture.path, { kind: "existing" }, { purpose: "discovery" }));
    expect(r.value?.state.lifecycleEnvironment?.PASEO_BRANCH_NAME).toBe("main");
    expect(r.value?.materializedFreshContent).toBe(true);
    expect(JSON.parse(readFileSync(onHost(workspaceLayout(d.root, "mat-probe").manifest), "utf8")).purpose).toBe("discovery");
    expect((await d.op("destroy", "mat-probe")).ok).toBe(true);
  });

  it("4,000 files with multi-byte names (an index listing of many pipe chunks): the create succeeds with every name", async () => {
    const repo = seedRepo(s.tmp("paseo-ws-mat-names-")).path;
    const names = Array.from({ length: 4000 }, (_, i) => `ファイル-${i}-${"語".repeat(20)}.txt`);
    mkdirSync(join(repo, "名前"));
    for (const n of names) writeFileSync(join(repo, "名前", n), `${n}\n`);
    commitAll(repo, "names");
    const r = await d.create(dirInput("mat-names", repo));
    expect(r.message).toBe("");
    expect(r.value?.type).toBe("state");
    const dir = onHost(join(workspaceLayout(d.root, "mat-names").checkout, "名前"));
    expect(readdirSync(dir).sort()).toEqual([...names].sort());
    expect(readFileSync(join(dir, names[3999]!), "utf8")).toBe(`${names[3999]}\n`);
    expect((await d.op("destroy", "mat-names")).ok).toBe(true);
  });

  it("a file name that is not UTF-8 (Latin-1 bytes): the create succeeds and the host's file has exactly that name", async () => {
    const repo = seedRepo(s.tmp("paseo-ws-mat-latin1-")).path;
    const name = Buffer.concat([Buffer.from("caf"), Buffer.from([0xe9]), Buffer.from(".txt")]);
    writeFileSync(Buffer.concat([Buffer.from(`${repo}/`), name]), "latin-1\n");
    commitAll(repo, "latin-1 name");
    const r = await d.create(dirInput("mat-latin1", repo));
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, "mat-latin1").checkout;
    const names = readdirSync(onHost(checkout), { encoding: "buffer" });
    expect(names.some((n) => n.equals(name))).toBe(true);
    expect(readFileSync(Buffer.concat([Buffer.from(`${onHost(checkout)}/`), name]), "utf8")).toBe("latin-1\n");
    expect(hostGit(checkout, ["status", "--porcelain"])).toBe("");
    expect((await d.op("destroy", "mat-latin1")).ok).toBe(true);
  });
});
