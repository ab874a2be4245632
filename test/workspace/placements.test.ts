// Placement kinds and relativeCwd for directory sources (docs/contract.md#scenarios H1): each kind checks
// out the branch or ref it names, resolved on the Paseo host without modifying its repository;
// escapes are refused before anything exists remotely, symlink escapes after checkout with a
// full rollback.
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { commitAll, gitIn, localRepoFingerprint, seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { cliDriver, dirInput, type Driver, removeRoot } from "../support/workspace.js";
import type { CreateInput } from "../../src/contract/schemas.js";
import { hostGit, onHost } from "../support/host-view.js";

describe("placements and relativeCwd over SSH", () => {
  const s = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  let side: string;
  let prHead: string;
  let d: Driver;

  beforeAll(() => {
    base = s.tmp("paseo-ws-place-");
    fixture = seedRepo(base);
    mkdirSync(join(fixture.path, "sub", "deeper"), { recursive: true });
    writeFileSync(join(fixture.path, "sub", "deeper", "file.txt"), "deep\n");
    symlinkSync("..", join(fixture.path, "escape-link"));
    fixture.commit = commitAll(fixture.path, "sub and escape link");
    gitIn(fixture.path, ["branch", "side"]);
    gitIn(fixture.path, ["checkout", "-q", "side"]);
    writeFileSync(join(fixture.path, "side.txt"), "side\n");
    side = commitAll(fixture.path, "side");
    prHead = side;
    gitIn(fixture.path, ["checkout", "-q", "main"]);
    // A change request fetched the usual way: only a remote-tracking ref exists locally.
    gitIn(fixture.path, ["update-ref", "refs/remotes/origin/pr-head", prHead]);
    d = cliDriver("place");
    s.push(() => removeRoot(d.root));
  });

  async function expectCheckout(id: string, placement: CreateInput["placement"], commit: string, branch: string): Promise<string> {
    const before = localRepoFingerprint(fixture.path);
    const r = await d.create(dirInput(id, fixture.path, placement));
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, id).checkout;
    expect(hostGit(checkout, ["rev-parse", "HEAD"]).trim()).toBe(commit);
    const sym = branch ? hostGit(checkout, ["symbolic-ref", "--short", "HEAD"]).trim() : "";
    expect(sym).toBe(branch);
    if (!branch) expect(() => hostGit(checkout, ["symbolic-ref", "-q", "HEAD"])).toThrow();
    expect(r.value?.state.lifecycleEnvironment?.PASEO_BRANCH_NAME).toBe(branch);
    expect(hostGit(checkout, ["status", "--porcelain"])).toBe("");
    expect(localRepoFingerprint(fixture.path)).toEqual(before);
    expect((await d.op("destroy", id)).ok).toBe(true);
    return checkout;
  }

  it("branch: a new branch at baseRef", () =>
    expectCheckout("pl-branch", { kind: "branch", branchName: "feature/x", baseRef: "side" }, side, "feature/x"));
  it("checkout of a local branch stays on it", () => expectCheckout("pl-co-branch", { kind: "checkout", ref: "side" }, side, "side"));
  it("checkout of a commit is detached", () => expectCheckout("pl-co-sha", { kind: "checkout", ref: fixture.commit }, fixture.commit, ""));
  it("resolved-worktree branch-off", () =>
    expectCheckout(
      "pl-rw-off",
      { kind: "resolved-worktree", worktreeSlug: "s", source: { kind: "branch-off", baseBranch: "main", branchName: "off" } },
      fixture.commit,
      "off",
    ));
  it("resolved-worktree checkout-branch", () =>
    expectCheckout(
      "pl-rw-co",
      { kind: "resolved-worktree", worktreeSlug: "s", source: { kind: "checkout-branch", branchName: "side" } },
      side,
      "side",
    ));
  it("resolved-worktree change request from its remote-tracking ref", () =>
    expectCheckout(
      "pl-rw-pr",
      {
        kind: "resolved-worktree",
        worktreeSlug: "s",
        source: {
          kind: "checkout-github-pr",
          githubPrNumber: 7,
          headRef: "pr-head",
          baseRefName: "main",
          checkoutRefs: [{ remoteName: "origin", remoteRef: "refs/heads/pr-head" }],
          localBranchName: "pr-7",
        },
      },
      prHead,
      "pr-7",
    ));

  it("a detached HEAD materializes detached", async () => {
    gitIn(fixture.path, ["checkout", "-q", "--detach", "main"]);
    try {
      await expectCheckout("pl-detached", { kind: "existing" }, fixture.commit, "");
    } finally {
      gitIn(fixture.path, ["checkout", "-q", "main"]);
    }
  });

  it("an unresolvable change request fails clearly and creates nothing", async () => {
    const id = "pl-rw-missing";
    const r = await d.create(
      dirInput(id, fixture.path, {
        kind: "resolved-worktree",
        worktreeSlug: "s",
        source: { kind: "checkout-change-request", headRef: "nowhere", baseRefName: "main" },
      }),
    );
    expect(r.ok).toBe(false);
    expect(r.message).toMatch(/Cannot resolve change request head "nowhere".*fetch it first/);
    expect(existsSync(onHost(workspaceLayout(d.root, id).dir))).toBe(false);
  });

  it("relativeCwd selects a directory inside the checkout", async () => {
    const r = await d.create(dirInput("pl-cwd", fixture.path, { kind: "existing", relativeCwd: "sub/deeper" }));
    expect(r.value?.placement.cwd).toBe(join(workspaceLayout(d.root, "pl-cwd").checkout, "sub", "deeper"));
    expect((await d.inspect("pl-cwd")).value?.inspection).toMatchObject({ status: "ready", placement: { cwd: r.value?.placement.cwd } });
    expect((await d.op("destroy", "pl-cwd")).ok).toBe(true);
  });

  it.each(["../escape", "/etc", "sub\\..\\..", "a\u0000b", "sub/../../x"])(
    "H1: relativeCwd %j is refused before anything is created",
    async (rel) => {
      const id = `pl-h1-${Buffer.from(rel).toString("hex")}`;
      const r = await d.create(dirInput(id, fixture.path, { kind: "existing", relativeCwd: rel }));
      expect(r.ok).toBe(false);
      expect(r.message).toBe("Workspace cwd escapes its root");
      expect(existsSync(onHost(workspaceLayout(d.root, id).dir))).toBe(false);
    },
  );

  it("a committed symlink leading out is refused after checkout and rolled back", async () => {
    const r = await d.create(dirInput("pl-symlink", fixture.path, { kind: "existing", relativeCwd: "escape-link" }));
    expect(r.message).toBe("Workspace cwd escapes its root");
    expect(existsSync(onHost(workspaceLayout(d.root, "pl-symlink").dir))).toBe(false);
    expect((await d.inspect("pl-symlink")).value?.inspection).toEqual({ status: "missing" });
  });

  it("a missing relativeCwd fails and leaves nothing", async () => {
    const r = await d.create(dirInput("pl-nodir", fixture.path, { kind: "existing", relativeCwd: "nope" }));
    expect(r.message).toBe("Workspace directory does not exist in the checkout: nope");
    expect(existsSync(onHost(workspaceLayout(d.root, "pl-nodir").dir))).toBe(false);
  });
});
