// Issue 27 over the real sshd: an agent's commits and uncommitted work on the host come back into
// the Paseo side repository before the workspace is removed (destroy, release-backing, reconcile),
// landing as local branches the runtime created or under refs/paseo-ssh/<workspace>/, with the
// local HEAD, index, working tree, config and every other branch untouched. Where the work cannot
// come back (a deleted local repository, a git source) the host keeps it and the operation says
// where on stderr.
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { gitIn, seedRepo, treeSnapshot, type FixtureRepo } from "../fixtures/repo.js";
import { hostGitSource } from "../support/host-git-source.js";
import { cliDriver, dirInput, gitAsRemoteUser, OWNER, removeRoot, type Driver } from "../support/workspace.js";
import { hostView, onHost } from "../support/host-view.js";
import { rig } from "../rig/rig.js";
import { randomBytes } from "node:crypto";
import { bringBack } from "../../src/mirror/bring-back.js";
import { withHost } from "../../src/broker/client/open-host.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";

/** The bytes of what the user works with: HEAD, index, config, the working tree's files, and every ref. */
function localState(repo: string): Record<string, string> {
  const git = join(repo, ".git");
  return {
    head: readFileSync(join(git, "HEAD"), "utf8"),
    index: readFileSync(join(git, "index")).toString("base64"),
    config: readFileSync(join(git, "config"), "utf8"),
    tree: treeSnapshot(repo)
      .split("\n")
      .filter((l) => !l.startsWith(git))
      .join("\n"),
    status: gitIn(repo, ["status", "--porcelain", "--untracked-files=all"]),
  };
}

/** Git on the host in an archive the host kept (its alternates name host paths: read it there). */
const archived = (archive: string, args: string[]) => gitAsRemoteUser(archive, ["--git-dir", archive, ...args]);

const refsOf = (repo: string, prefix = "") =>
  gitIn(repo, ["for-each-ref", "--format=%(refname) %(objectname)", ...(prefix ? [prefix] : [])])
    .trim()
    .split("\n")
    .filter(Boolean);

/** The agent's work in the host's checkout: commits on two branches, an edit, a new file, an ignored one. */
function agentWorks(checkout: string): { feature: string; other: string } {
  writeFileSync(onHost(join(checkout, "committed.txt")), "agent edit 1\n");
  gitAsRemoteUser(checkout, ["commit", "-q", "-am", "agent: first"]);
  writeFileSync(onHost(join(checkout, "new-file.txt")), "agent new file\n");
  gitAsRemoteUser(checkout, ["add", "new-file.txt"]);
  gitAsRemoteUser(checkout, ["commit", "-q", "-m", "agent: second"]);
  const feature = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();
  gitAsRemoteUser(checkout, ["switch", "-q", "-c", "agent/other"]);
  writeFileSync(onHost(join(checkout, "other.txt")), "other branch\n");
  gitAsRemoteUser(checkout, ["add", "other.txt"]);
  gitAsRemoteUser(checkout, ["commit", "-q", "-m", "agent: other branch"]);
  const other = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();
  gitAsRemoteUser(checkout, ["switch", "-q", "agent/feature"]);
  // Uncommitted: a tracked edit, an untracked file, and an ignored one that must not come back.
  writeFileSync(onHost(join(checkout, "committed.txt")), "uncommitted edit\n");
  writeFileSync(onHost(join(checkout, "untracked.txt")), "untracked work\n");
  writeFileSync(onHost(join(checkout, ".gitignore")), "ignored.log\n");
  writeFileSync(onHost(join(checkout, "ignored.log")), "ignored\n");
  return { feature, other };
}

describe("work comes back before a workspace is removed", () => {
  const s = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  let d: Driver;

  beforeAll(() => {
    base = s.tmp("paseo-work-back-");
    fixture = seedRepo(base);
    // A branch of the user's own, and a stash-free, dirty working tree: none of it may change.
    gitIn(fixture.path, ["branch", "user-branch"]);
    writeFileSync(join(fixture.path, "committed.txt"), "the user's own uncommitted edit\n");
    d = cliDriver("work-back");
    s.push(() => removeRoot(d.root));
  });

  it("destroy keeps two branches of commits and the uncommitted work, and touches nothing else locally", async () => {
    const id = "wb-destroy";
    const created = await d.create(dirInput(id, fixture.path, { kind: "branch", branchName: "agent/feature", baseRef: "main" }));
    expect(created.ok, created.message).toBe(true);
    const checkout = workspaceLayout(d.root, id).checkout;
    const { feature, other } = agentWorks(checkout);
    const before = localState(fixture.path);
    // The user's own branches (the live mirror may have made agent/* meanwhile: those are the runtime's).
    const userRefs = refsOf(fixture.path, "refs/heads/").filter((r) => !r.startsWith("refs/heads/agent/"));

    const r = await d.op("destroy", id);
    expect(r.ok, r.message).toBe(true);
    expect(r.stderr).toBe("");
    expect(existsSync(onHost(workspaceLayout(d.root, id).dir))).toBe(false);

    // The branches the workspace made appear as local branches, at the host's commits.
    expect(gitIn(fixture.path, ["rev-parse", "refs/heads/agent/feature"]).trim()).toBe(feature);
    expect(gitIn(fixture.path, ["rev-parse", "refs/heads/agent/other"]).trim()).toBe(other);
    expect(gitIn(fixture.path, ["show", `${other}:other.txt`])).toBe("other branch\n");
    // And everything under the workspace's namespace, the uncommitted work on top of HEAD.
    const ns = `refs/paseo-ssh/${id}`;
    expect(gitIn(fixture.path, ["rev-parse", `${ns}/head`]).trim()).toBe(feature);
    expect(gitIn(fixture.path, ["rev-parse", `${ns}/heads/agent/feature`]).trim()).toBe(feature);
    expect(gitIn(fixture.path, ["rev-parse", `${ns}/uncommitted^`]).trim()).toBe(feature);
    expect(gitIn(fixture.path, ["show", `${ns}/uncommitted:committed.txt`])).toBe("uncommitted edit\n");
    expect(gitIn(fixture.path, ["show", `${ns}/uncommitted:untracked.txt`])).toBe("untracked work\n");
    expect(gitIn(fixture.path, ["ls-tree", "--name-only", `${ns}/uncommitted`])).not.toContain("ignored.log");
    gitIn(fixture.path, ["fsck", "--connectivity-only", "--no-dangling"]);

    // Nothing the user works with moved: HEAD, index, config, files, and their own branches.
    expect(localState(fixture.path)).toEqual(before);
    const now = refsOf(fixture.path, "refs/heads/");
    for (const ref of userRefs) expect(now).toContain(ref);
    // Nothing was kept on the host: all of it came back.
    expect(existsSync(onHost(join(d.root, "archive"))) ? readdirSync(onHost(join(d.root, "archive"))) : []).toEqual([]);
    expect((await d.op("destroy", id)).ok).toBe(true);
  });

  it("`work` brings the commits back now and says where; a second run sends nothing", async () => {
    // In-process connections: no broker, so no live mirror racing the runs this test counts.
    const direct = cliDriver("work-direct");
    (direct.options as Record<string, unknown>).broker = false;
    const d = direct;
    const id = "wb-work";
    expect((await d.create(dirInput(id, fixture.path, { kind: "branch", branchName: "agent/now", baseRef: "main" }))).ok).toBe(true);
    const checkout = workspaceLayout(d.root, id).checkout;
    writeFileSync(onHost(join(checkout, "now.txt")), "now\n");
    gitAsRemoteUser(checkout, ["add", "now.txt"]);
    gitAsRemoteUser(checkout, ["commit", "-q", "-m", "now"]);
    const head = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();
    const first = await d.op("work", id);
    expect(first.ok, first.message).toBe(true);
    const answer = JSON.parse(first.stdout) as { repository: string; namespace: string; branches: unknown[]; bytes: number };
    expect(answer.repository).toBe(join(fixture.path, ".git"));
    expect(answer.namespace).toBe(`refs/paseo-ssh/${id}`);
    expect(answer.branches).toEqual([{ name: "agent/now", local: "created" }]);
    expect(answer.bytes).toBeGreaterThan(0);
    expect(gitIn(fixture.path, ["rev-parse", "agent/now"]).trim()).toBe(head);
    // The workspace's next commit moves the branch the runtime created (it is still where it was left).
    writeFileSync(onHost(join(checkout, "now.txt")), "later\n");
    gitAsRemoteUser(checkout, ["commit", "-q", "-am", "later"]);
    const later = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();
    const second = JSON.parse((await d.op("work", id)).stdout) as { branches: unknown[]; bytes: number };
    expect(second.branches).toEqual([{ name: "agent/now", local: "moved" }]);
    expect(gitIn(fixture.path, ["rev-parse", "agent/now"]).trim()).toBe(later);
    const third = JSON.parse((await d.op("work", id)).stdout) as { branches: unknown[]; bytes: number };
    expect(third).toMatchObject({ branches: [{ name: "agent/now", local: "unchanged" }], bytes: 0 });
    // A branch the user moved is theirs from then on: the next commit stays in the namespace only.
    gitIn(fixture.path, ["branch", "-f", "agent/now", "main"]);
    gitAsRemoteUser(checkout, ["commit", "-q", "--allow-empty", "-m", "after the user moved it"]);
    const last = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();
    const fourth = JSON.parse((await d.op("work", id)).stdout) as { branches: unknown[] };
    expect(fourth.branches).toEqual([{ name: "agent/now", local: "left" }]);
    expect(gitIn(fixture.path, ["rev-parse", "agent/now"]).trim()).toBe(fixture.commit);
    expect(gitIn(fixture.path, ["rev-parse", `refs/paseo-ssh/${id}/heads/agent/now`]).trim()).toBe(last);
    expect((await d.op("destroy", id)).ok).toBe(true);
    removeRoot(direct.root);
  });

  it("a pack over the bound is refused: nothing local changes and the quarantine is gone", async () => {
    const direct = cliDriver("work-bound");
    (direct.options as Record<string, unknown>).broker = false;
    const id = "wb-bound";
    expect((await direct.create(dirInput(id, fixture.path, { kind: "branch", branchName: "agent/big", baseRef: "main" }))).ok).toBe(true);
    const checkout = workspaceLayout(direct.root, id).checkout;
    writeFileSync(onHost(join(checkout, "big.bin")), randomBytes(200_000));
    gitAsRemoteUser(checkout, ["add", "big.bin"]);
    gitAsRemoteUser(checkout, ["commit", "-q", "-m", "big"]);
    const before = refsOf(fixture.path);
    const options = parseRuntimeOptions(direct.options);
    await withHost(options, async (host) => {
      const { state } = await host.call("workspace.work-state", { workspaceId: id, owner: OWNER, snapshot: false });
      await expect(bringBack(host, state!, { maxBytes: 50_000 })).rejects.toThrow(
        `the host sent more than 0 MiB of objects for workspace ${id} (more than one pack may carry); nothing was taken`,
      );
    });
    expect(refsOf(fixture.path)).toEqual(before);
    expect(readdirSync(join(fixture.path, ".git", "objects")).filter((n) => n.startsWith("incoming-"))).toEqual([]);
    expect((await direct.op("destroy", id)).ok).toBe(true);
    removeRoot(direct.root);
  });

  it("a host that names commits it does not send (a shallow checkout, an id it never had) is refused; destroy keeps the work on the host", async () => {
    const direct = cliDriver("work-unsent");
    (direct.options as Record<string, unknown>).broker = false;
    const id = "wb-unsent";
    expect((await direct.create(dirInput(id, fixture.path, { kind: "branch", branchName: "agent/unsent", baseRef: "main" }))).ok).toBe(
      true,
    );
    const checkout = workspaceLayout(direct.root, id).checkout;
    for (const n of [1, 2]) {
      writeFileSync(onHost(join(checkout, `unsent-${n}.txt`)), `commit ${n}\n`);
      gitAsRemoteUser(checkout, ["add", `unsent-${n}.txt`]);
      gitAsRemoteUser(checkout, ["commit", "-q", "-m", `unsent ${n}`]);
    }
    const head = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();
    // The newest commit as a shallow boundary: the host's pack carries it but not its parent.
    hostView()!.run(rig().user, ["/bin/sh", "-c", 'git rev-parse HEAD > "$(git rev-parse --git-dir)/shallow"'], {
      cwd: checkout,
      env: { PATH: "/usr/bin:/bin" },
    });
    const before = refsOf(fixture.path);
    const options = parseRuntimeOptions(direct.options);
    await withHost(options, async (host) => {
      const { state } = await host.call("workspace.work-state", { workspaceId: id, owner: OWNER, snapshot: false });
      expect(state!.head).toBe(head);
      await expect(bringBack(host, state!)).rejects.toThrow(
        new RegExp(`^the host's objects for workspace ${id} are incomplete \\(.+\\); nothing was taken$`),
      );
      // An id the host never had: its export fails, and nothing is taken either.
      const invented = randomBytes(20).toString("hex");
      await expect(bringBack(host, { ...state!, branches: [{ name: "agent/unsent", commit: invented }], head: invented })).rejects.toThrow(
        `workspace checkout has no commit ${invented}`,
      );
    });
    expect(refsOf(fixture.path)).toEqual(before);
    expect(() => gitIn(fixture.path, ["cat-file", "-e", head])).toThrow();
    expect(readdirSync(join(fixture.path, ".git", "objects")).filter((n) => n.startsWith("incoming-"))).toEqual([]);
    gitIn(fixture.path, ["fsck", "--connectivity-only", "--no-dangling"]);
    // Removal cannot bring it back, so the host keeps it and says where: nothing is lost.
    const r = await direct.op("destroy", id);
    expect(r.ok, r.message).toBe(true);
    const kept = /the work of workspace "wb-unsent" is kept on the host at (\S+) until/.exec(r.stderr);
    expect(kept, r.stderr).not.toBeNull();
    expect(r.stderr).toContain("incomplete");
    expect(archived(kept![1]!, ["show", `${head}:unsent-2.txt`])).toBe("commit 2\n");
    expect(refsOf(fixture.path)).toEqual(before);
    removeRoot(direct.root);
  });

  it("a branch of the same name the user already has locally is left alone; the work is under the namespace", async () => {
    const id = "wb-clash";
    gitIn(fixture.path, ["branch", "agent/clash", "main"]);
    const mine = gitIn(fixture.path, ["rev-parse", "agent/clash"]).trim();
    expect((await d.create(dirInput(id, fixture.path, { kind: "branch", branchName: "agent/clash", baseRef: "main" }))).ok).toBe(true);
    const checkout = workspaceLayout(d.root, id).checkout;
    writeFileSync(onHost(join(checkout, "clash.txt")), "workspace\n");
    gitAsRemoteUser(checkout, ["add", "clash.txt"]);
    gitAsRemoteUser(checkout, ["commit", "-q", "-m", "workspace commit"]);
    const theirs = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();

    const r = await d.op("release-backing", id);
    expect(r.ok).toBe(false); // a ready workspace is refused, and nothing is lost by asking
    expect((await d.op("pause", id)).ok).toBe(true);
    const released = await d.op("release-backing", id);
    expect(released.ok, released.message).toBe(true);
    expect(gitIn(fixture.path, ["rev-parse", "agent/clash"]).trim()).toBe(mine);
    expect(gitIn(fixture.path, ["rev-parse", `refs/paseo-ssh/${id}/heads/agent/clash`]).trim()).toBe(theirs);
  });

  it("reconcile brings an orphan's work back before removing it", async () => {
    const id = "wb-orphan";
    expect((await d.create(dirInput(id, fixture.path, { kind: "branch", branchName: "agent/orphan", baseRef: "main" }))).ok).toBe(true);
    const checkout = workspaceLayout(d.root, id).checkout;
    writeFileSync(onHost(join(checkout, "orphan.txt")), "orphan's work\n");
    gitAsRemoteUser(checkout, ["add", "orphan.txt"]);
    gitAsRemoteUser(checkout, ["commit", "-q", "-m", "orphan commit"]);
    const head = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();
    const r = await d.reconcile([], { verbose: true });
    expect(r.ok, r.message).toBe(true);
    expect(r.stderr).toContain(`removed orphaned workspace "${id}"`);
    expect(existsSync(onHost(workspaceLayout(d.root, id).dir))).toBe(false);
    expect(gitIn(fixture.path, ["rev-parse", "refs/heads/agent/orphan"]).trim()).toBe(head);
  });

  it("with the local repository gone, the work is kept on the host and destroy says where", async () => {
    const id = "wb-gone";
    const copy = join(base, "gone");
    gitIn(base, ["clone", "-q", fixture.path, copy]);
    expect((await d.create(dirInput(id, copy, { kind: "branch", branchName: "agent/gone", baseRef: "main" }))).ok).toBe(true);
    const checkout = workspaceLayout(d.root, id).checkout;
    writeFileSync(onHost(join(checkout, "gone.txt")), "nowhere to go\n");
    gitAsRemoteUser(checkout, ["add", "gone.txt"]);
    gitAsRemoteUser(checkout, ["commit", "-q", "-m", "kept on the host"]);
    const head = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();
    rmSync(copy, { recursive: true, force: true });

    const r = await d.op("destroy", id);
    expect(r.ok, r.message).toBe(true);
    const kept = /destroy: the work of workspace "wb-gone" is kept on the host at (\S+) until (\S+) /.exec(r.stderr);
    expect(kept, r.stderr).not.toBeNull();
    expect(r.stderr).toContain("is gone or is not a git repository");
    const archive = kept![1]!;
    expect(archive.startsWith(join(d.root, "archive") + "/")).toBe(true);
    expect(Date.parse(kept![2]!) - Date.now()).toBeGreaterThan(13 * 24 * 3600_000);
    expect(archived(archive, ["rev-parse", "refs/heads/agent/gone"]).trim()).toBe(head);
    expect(archived(archive, ["cat-file", "-p", `${head}:gone.txt`])).toBe("nowhere to go\n");
  });
});

describe("a git-source workspace keeps its work on the host", () => {
  const s = suite("all");
  let base: string;
  let d: Driver;
  let src: ReturnType<typeof hostGitSource> | undefined;
  beforeAll(() => {
    base = s.tmp("paseo-work-git-");
    d = cliDriver("work-git");
    s.push(() => removeRoot(d.root));
    s.push(() => src?.remove());
  });

  it("destroy archives its commits and says where; a clean one leaves nothing behind", async () => {
    const source = (src = hostGitSource(base, "work-git-src"));
    const input = (id: string) => ({
      workspaceId: id,
      project: { projectId: "git-project", source: { kind: "git" as const, url: source.url, revision: "" } },
      placement: { kind: "branch" as const, branchName: "feat", baseRef: source.pinned },
    });
    expect((await d.create(input("wg-clean"))).ok).toBe(true);
    const clean = await d.op("destroy", "wg-clean");
    expect(clean.ok).toBe(true);
    expect(clean.stderr).toBe("");

    expect((await d.create(input("wg-work"))).ok).toBe(true);
    const checkout = workspaceLayout(d.root, "wg-work").checkout;
    const rel = readdirSync(onHost(checkout)).includes("packages") ? "packages/app/marker.txt" : "marker.txt";
    writeFileSync(onHost(join(checkout, rel)), "agent\n");
    const r = await d.op("destroy", "wg-work");
    expect(r.ok, r.message).toBe(true);
    const kept = /is kept on the host at (\S+) until/.exec(r.stderr);
    expect(kept, r.stderr).not.toBeNull();
    expect(archived(kept![1]!, ["show", `refs/paseo-ssh/uncommitted:${rel}`])).toBe("agent\n");
  });
});
