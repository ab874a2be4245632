// The project's own remotes over the real sshd (issue 28, item 1): a directory-source workspace's
// `git remote -v` is the Paseo side repository's, its branch tracks what it tracks there (a new
// branch nothing), the host's object cache lends objects without being a remote, and a fetch from
// a forge the host cannot reach fails with git's own message. Also through a spare checkout.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { cachePath } from "../../src/remote-agent/workspace/git-cache.js";
import { projectKey } from "../../src/workspace/create-workspace.js";
import { commitAll, gitIn, seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { cliDriver, dirInput, gitAsRemoteUser, type Driver, removeRoot } from "../support/workspace.js";
import { hostGit, onHost } from "../support/host-view.js";

const TOKEN = "s3cr3t-t0ken-28";

describe("the project's own remotes in a directory-source workspace", { timeout: 120_000 }, () => {
  const s = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  let d: Driver;
  let upstreamCommit: string;

  beforeAll(() => {
    base = s.tmp("paseo-ws-remotes-");
    fixture = seedRepo(base);
    const repo = fixture.path;
    gitIn(repo, ["remote", "add", "origin", "git@github.com:acme/widgets.git"]);
    gitIn(repo, ["remote", "add", "upstream", "https://github.com/upstream/widgets.git"]);
    gitIn(repo, ["config", "remote.upstream.pushurl", "git@github.com:me/widgets-fork.git"]);
    gitIn(repo, ["remote", "add", "offline", "ssh://git@127.0.0.1:1/acme/widgets.git"]);
    gitIn(repo, ["remote", "add", "tokened", `https://bot:${TOKEN}@example.com/acme/widgets.git`]);
    // origin/main has a commit main lacks, and main one origin/main lacks: diverged, as after a fetch.
    gitIn(repo, ["switch", "-q", "-c", "theirs"]);
    writeFileSync(join(repo, "theirs.txt"), "theirs\n");
    upstreamCommit = commitAll(repo, "theirs");
    gitIn(repo, ["update-ref", "refs/remotes/origin/main", upstreamCommit]);
    gitIn(repo, ["switch", "-q", "main"]);
    gitIn(repo, ["branch", "-q", "-D", "theirs"]);
    gitIn(repo, ["config", "branch.main.remote", "origin"]);
    gitIn(repo, ["config", "branch.main.merge", "refs/heads/main"]);
    writeFileSync(join(repo, "ours.txt"), "ours\n");
    fixture = { path: repo, commit: commitAll(repo, "ours") };
    d = cliDriver("remotes");
    s.push(() => removeRoot(d.root));
  });

  /** `git remote -v` as the Paseo side shows it, with the token dropped (it never reaches the host). */
  const localRemotes = () => gitIn(fixture.path, ["remote", "-v"]).replaceAll(`https://bot:${TOKEN}@example.com/`, "https://example.com/");

  const checkRemotes = (checkout: string, trackingRefs: string) => {
    expect(hostGit(checkout, ["remote", "-v"])).toBe(localRemotes());
    expect(hostGit(checkout, ["remote", "-v"])).toContain("upstream\tgit@github.com:me/widgets-fork.git (push)");
    // The cache lends objects through alternates, and is no remote: none of its refs shows up.
    expect(readFileSync(onHost(join(checkout, ".git", "objects", "info", "alternates")), "utf8").trim()).toBe(
      join(cachePath(d.root, projectKey("fixture-project", fixture.path)), "objects"),
    );
    expect(hostGit(checkout, ["for-each-ref", "--format=%(refname)", "refs/remotes/", "refs/paseo/"]).trim()).toBe(trackingRefs);
    const config = readFileSync(onHost(join(checkout, ".git", "config")), "utf8");
    expect(config).not.toContain(TOKEN);
    expect(config).not.toContain("/cache/");
  };

  it("git remote -v is the local repository's; main tracks origin/main as it does locally", async () => {
    const r = await d.create(dirInput("rem-a", fixture.path));
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, "rem-a").checkout;
    checkRemotes(checkout, "refs/remotes/origin/main");
    expect(hostGit(checkout, ["rev-parse", "--abbrev-ref", "main@{upstream}"]).trim()).toBe("origin/main");
    expect(hostGit(checkout, ["rev-parse", "origin/main"]).trim()).toBe(upstreamCommit);
    // Its history came along: status compares as on the Paseo side.
    expect(hostGit(checkout, ["status", "-sb"]).split("\n")[0]).toBe("## main...origin/main [ahead 1, behind 1]");
    // A forge the host cannot reach: git's own failure, nothing of ours.
    let failure = "";
    try {
      gitAsRemoteUser(checkout, ["fetch", "offline"]);
    } catch (err) {
      failure = String((err as { stderr?: unknown }).stderr ?? err);
    }
    // (git's words differ by host: sshd refuses, or no ssh client is installed to try.)
    expect(failure).toMatch(/fatal: (Could not read from remote repository\.|unable to fork)/);
  });

  it("a new branch has the remotes and no upstream, as after git switch -c", async () => {
    const r = await d.create(dirInput("rem-b", fixture.path, { kind: "branch", baseRef: "main", branchName: "agent/feature" }));
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, "rem-b").checkout;
    checkRemotes(checkout, "");
    expect(hostGit(checkout, ["symbolic-ref", "--short", "HEAD"]).trim()).toBe("agent/feature");
    expect(() => hostGit(checkout, ["rev-parse", "--abbrev-ref", "agent/feature@{upstream}"])).toThrow();
    expect(() => hostGit(checkout, ["config", "--get-regexp", "^branch\\."])).toThrow();
  });

  it("a workspace made from a spare checkout gets them too", async () => {
    const spare = join(cachePath(d.root, projectKey("fixture-project", fixture.path)), "paseo-spares", fixture.commit);
    const deadline = Date.now() + 60_000;
    while (!existsSync(onHost(join(spare, "ours.txt")))) {
      if (Date.now() > deadline) throw new Error(`no spare checkout at ${spare} within 60 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const r = await d.create(dirInput("rem-c", fixture.path));
    expect(r.message).toBe("");
    expect(existsSync(onHost(spare))).toBe(false); // taken
    const checkout = workspaceLayout(d.root, "rem-c").checkout;
    checkRemotes(checkout, "refs/remotes/origin/main");
    expect(hostGit(checkout, ["rev-parse", "--abbrev-ref", "main@{upstream}"]).trim()).toBe("origin/main");
  });
});
