// Submodules over the real sshd: a superproject with a nested submodule arrives whole, from the
// objects the Paseo side has (the host cannot reach any origin): each submodule at its recorded
// commit, initialised, clean, with origin = its .gitmodules URL resolved as git resolves it; a
// second workspace sends nothing; a submodule never initialised locally stays as `git worktree
// add` leaves it (and `git submodule update --init` still works for it), and progress names it, as
// it names a declared path that leaves the repository.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { gitIn, localRepoFingerprint, treeSnapshot } from "../fixtures/repo.js";
import { cachePath } from "../../src/remote-agent/workspace/git-cache.js";
import { projectKey } from "../../src/workspace/create-workspace.js";
import { brokenSubmodule, clonedSuperproject, superproject, type SuperFixture } from "../fixtures/submodules.js";
import { cliDriver, dirInput, gitAsRemoteUser, progressLines, type Driver, removeRoot } from "../support/workspace.js";
import { needs, unless } from "../support/needs.js";

const PROGRESS = { PASEO_SSH_PROGRESS: "1" };

/** Object bytes a create sent: the superproject's and every submodule's. */
function allBytesSent(stderr: string): number {
  const lines = progressLines(stderr).filter((p) => p.phase === "objects-sent" || p.phase === "submodule-objects-sent");
  expect(lines.some((p) => p.phase === "objects-sent")).toBe(true);
  return lines.reduce((sum, p) => sum + (p.bytes ?? NaN), 0);
}

describe("submodules over SSH", unless(needs.localHost("looks at the submodules' caches and git dirs on the host")), () => {
  const s = suite("all");
  let base: string;
  let fx: SuperFixture;
  let d: Driver;

  beforeAll(() => {
    base = s.tmp("paseo-ws-submod-");
    fx = superproject(base);
    d = cliDriver("submod");
    s.push(() => removeRoot(d.root));
  });

  const expectComplete = (checkout: string, f: SuperFixture = fx) => {
    const git = (...args: string[]) => gitAsRemoteUser(checkout, args);
    expect(readFileSync(join(checkout, "top.txt"), "utf8")).toBe("top\n");
    expect(readFileSync(join(checkout, "libs/child/c.txt"), "utf8")).toBe("child\n");
    expect(readFileSync(join(checkout, "libs/child/deps/grand/g.txt"), "utf8")).toBe("grand\n");
    // Each at its recorded commit and initialised (" "), the one the Paseo side lacks not ("-");
    // each on the branch its clone made, as in the local repository (issue 30 item 15).
    expect(git("submodule", "status", "--recursive").split("\n").filter(Boolean)).toEqual([
      `-${f.absent} libs/absent`,
      ` ${f.child} libs/child (heads/main)`,
      ` ${f.grand} libs/child/deps/grand (heads/main)`,
      ` ${f.embedded} libs/embedded (heads/main)`,
    ]);
    expect(readFileSync(join(checkout, "libs/embedded/e.txt"), "utf8")).toBe("embedded\n");
    expect(git("status", "--porcelain", "--ignore-submodules=none")).toBe("");
    expect(gitAsRemoteUser(join(checkout, "libs/child"), ["status", "--porcelain"])).toBe("");
    // Relative URLs resolved against the superproject's origin, the nested one against its parent's.
    expect(gitAsRemoteUser(join(checkout, "libs/child"), ["remote", "get-url", "origin"]).trim()).toBe(
      "https://git.example.invalid/org/child.git",
    );
    expect(gitAsRemoteUser(join(checkout, "libs/child/deps/grand"), ["remote", "get-url", "origin"]).trim()).toBe(
      "https://git.example.invalid/org/grand.git",
    );
    expect(git("config", "submodule.libs/child.url").trim()).toBe("https://git.example.invalid/org/child.git");
    // Left exactly as `git worktree add` leaves it: an empty directory, nothing configured.
    expect(readdirSync(join(checkout, "libs/absent"))).toEqual([]);
    expect(() => git("config", "submodule.libs/absent.url")).toThrow();
  };

  it("a nested submodule arrives at its recorded commit, initialised and clean; the local repository is untouched", async () => {
    const before = localRepoFingerprint(fx.path);
    const gitDirBefore = treeSnapshot(join(fx.path, ".git")) + treeSnapshot(join(fx.path, "libs/embedded/.git"));
    const r = await d.create(dirInput("sub-a", fx.path), { env: PROGRESS });
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, "sub-a").checkout;
    expectComplete(checkout);
    // As in a normal clone, `git submodule update` finds nothing to do (no network needed).
    expect(gitAsRemoteUser(checkout, ["submodule", "update", "--recursive"])).toBe("");
    expectComplete(checkout);
    const lines = progressLines(r.stderr);
    expect(lines.filter((p) => p.phase === "submodule-not-initialised")).toEqual([expect.objectContaining({ path: "libs/absent" })]);
    // All three submodules' objects in one pack.
    const sent = lines.filter((p) => p.phase === "submodule-objects-sent") as Array<{
      submodules?: number;
      paths?: string;
      bytes?: number;
    }>;
    expect(sent).toHaveLength(1);
    expect(sent[0]!.submodules).toBe(3);
    expect(sent[0]!.paths!.split(", ").sort()).toEqual(["libs/child", "libs/child/deps/grand", "libs/embedded"]);
    expect(sent[0]!.bytes).toBeGreaterThan(0);
    expect(treeSnapshot(join(fx.path, ".git")) + treeSnapshot(join(fx.path, "libs/embedded/.git"))).toBe(gitDirBefore);
    expect(localRepoFingerprint(fx.path)).toEqual(before);
    console.log(`first workspace with submodules: ${allBytesSent(r.stderr)} object bytes sent`);
  });

  it("a second workspace of the same commits sends nothing and is as complete", async () => {
    const r = await d.create(dirInput("sub-b", fx.path), { env: PROGRESS });
    expect(r.message).toBe("");
    expect(allBytesSent(r.stderr)).toBe(0);
    expect(progressLines(r.stderr).filter((p) => p.phase === "submodule-objects-sent")).toEqual([]);
    expectComplete(workspaceLayout(d.root, "sub-b").checkout);
  });

  it("a workspace that takes a spare checkout gets its submodules as well", { timeout: 120_000 }, async () => {
    const spare = join(cachePath(d.root, projectKey("fixture-project", fx.path)), "paseo-spares", fx.commit);
    const deadline = Date.now() + 60_000;
    while (!existsSync(join(spare, "top.txt"))) {
      if (Date.now() > deadline) throw new Error(`no spare checkout at ${spare} within 60 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // A spare holds the superproject only: its submodule directories are still empty.
    expect(readdirSync(join(spare, "libs/child"))).toEqual([]);
    const taken = statSync(join(spare, "top.txt")).ino;
    const r = await d.create(dirInput("sub-c", fx.path), { env: PROGRESS });
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, "sub-c").checkout;
    expect(statSync(join(checkout, "top.txt")).ino).toBe(taken);
    expectComplete(checkout);
    expect(allBytesSent(r.stderr)).toBe(0);
  });

  it("the submodule left uninitialised still initialises the normal way, where its URL is reachable", async () => {
    const checkout = workspaceLayout(d.root, "sub-a").checkout;
    // git serves a repository only to its owner (or whom its owner trusts): the remote user here.
    const { uid, gid } = statSync(checkout);
    execFileSync("chown", ["-R", `${uid}:${gid}`, fx.absentBare]);
    gitAsRemoteUser(checkout, [
      "-c",
      "protocol.file.allow=always",
      "-c",
      "safe.directory=*",
      "submodule",
      "update",
      "--quiet",
      "--init",
      "libs/absent",
    ]);
    expect(readFileSync(join(checkout, "libs/absent/a.txt"), "utf8")).toBe("absent\n");
    expect(gitAsRemoteUser(checkout, ["submodule", "status", "--recursive"])).not.toMatch(/^[-+U]/m);
    expect(gitAsRemoteUser(checkout, ["status", "--porcelain"])).toBe("");
  });

  it("a submodule whose objects cannot be sent fails the create with one line naming it, and leaves nothing", async () => {
    const broken = brokenSubmodule(base);
    const r = await d.create(dirInput("sub-broken", broken.path), { env: PROGRESS });
    expect(r.ok).toBe(false);
    expect(r.message).toMatch(/^Cannot send the objects of submodule libs\/loose: git pack-objects failed/);
    console.log(`broken submodule: ${r.message}`);
    expect(r.stderr.split("\n").filter((l) => l !== "" && !l.startsWith("{"))).toEqual([r.message]);
    expect(existsSync(workspaceLayout(d.root, "sub-broken").dir)).toBe(false);
    expect(readdirSync(join(d.root, "tmp")).filter((n) => /^(checkout|incoming)-/.test(n))).toEqual([]);
    expect((await d.inspect("sub-broken")).value?.inspection).toEqual({ status: "missing" });
  });

  it("a linked worktree as the source, its submodules never initialised there: taken from the main worktree (its modules, an embedded .git)", async () => {
    const linked = join(base, "linked");
    gitIn(fx.path, ["worktree", "add", "-q", "--detach", linked, fx.commit]);
    expect(readdirSync(join(linked, "libs/child"))).toEqual([]);
    const r = await d.create(dirInput("sub-linked", linked), { env: PROGRESS });
    expect(r.message).toBe("");
    expectComplete(workspaceLayout(d.root, "sub-linked").checkout);
    expect((await d.op("destroy", "sub-linked")).ok).toBe(true);
  });

  it("four creates of a new superproject at once (its submodule caches made and filled concurrently): each complete", async () => {
    const fresh = superproject(mkdtempSync(join(base, "concurrent-")));
    const ids = ["sub-p1", "sub-p2", "sub-p3", "sub-p4"];
    const results = await Promise.all(ids.map((id) => d.create(dirInput(id, fresh.path), { env: PROGRESS })));
    for (const r of results) expect(r.message).toBe("");
    for (const id of ids) expectComplete(workspaceLayout(d.root, id).checkout, fresh);
    for (const id of ids) expect((await d.op("destroy", id)).ok).toBe(true);
  });

  it("each submodule's repository is as a clone leaves it: its branch, origin's branches and HEAD, tracking config (compared with a real clone)", async () => {
    const clone = clonedSuperproject(mkdtempSync(join(base, "cloned-")));
    const r = await d.create(dirInput("sub-clone", clone.path), { env: PROGRESS });
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, "sub-clone").checkout;
    const local = (cwd: string, ...args: string[]) => gitIn(cwd, args);
    const status = local(clone.path, "submodule", "status", "--recursive");
    // The reference: the clone's own view (a branch per submodule, not a bare commit).
    expect(status).toMatch(/ libs\/child \(heads\/main\)\n.* libs\/child\/deps\/grand \(heads\/main\)\n$/);
    expect(gitAsRemoteUser(checkout, ["submodule", "status", "--recursive"])).toBe(status);
    for (const sub of ["libs/child", "libs/child/deps/grand"]) {
      const there = join(checkout, sub);
      const here = join(clone.path, sub);
      expect(gitAsRemoteUser(there, ["branch", "-a"])).toBe(local(here, "branch", "-a"));
      const refs = ["for-each-ref", "--format=%(objectname) %(refname) %(symref) %(upstream)"];
      expect(gitAsRemoteUser(there, refs)).toBe(local(here, ...refs));
      expect(gitAsRemoteUser(there, ["config", "--get-regexp", "^branch\\."])).toBe(local(here, "config", "--get-regexp", "^branch\\."));
    }
    // origin/dev is ahead of the recorded commit: its history came along.
    const child = join(checkout, "libs/child");
    expect(gitAsRemoteUser(child, ["branch", "-a"])).toContain("remotes/origin/dev");
    expect(gitAsRemoteUser(child, ["show", "origin/dev:dev.txt"])).toBe("dev\n");
    expect(gitAsRemoteUser(child, ["status", "--porcelain"])).toBe("");
    expect(gitAsRemoteUser(checkout, ["status", "--porcelain", "--ignore-submodules=none"])).toBe("");
    expect((await d.op("destroy", "sub-clone")).ok).toBe(true);
  });

  it("destroy drops the workspace's pins in the submodule caches; the caches stay", async () => {
    expect((await d.op("destroy", "sub-b")).ok).toBe(true);
    const cacheBase = join(d.root, "cache");
    const pins = execFileSync("sh", ["-c", `find ${cacheBase} -path '*paseo-modules*' -path '*refs/paseo/ws/*' -type f | wc -l`])
      .toString()
      .trim();
    // sub-a's and sub-c's pins remain (one per submodule cache each), sub-b's are gone.
    expect(pins).toBe("6");
    expect(existsSync(workspaceLayout(d.root, "sub-a").checkout)).toBe(true);
  });

  it("a .gitmodules entry whose path leaves the repository is skipped with a progress line; the others arrive", async () => {
    const clone = join(base, "escaping-path");
    execFileSync("cp", ["-a", fx.path, clone]);
    gitIn(clone, ["config", "--file", ".gitmodules", "submodule.outside.path", "../../x"]);
    gitIn(clone, ["config", "--file", ".gitmodules", "submodule.outside.url", "https://git.example.invalid/org/x.git"]);
    gitIn(clone, ["commit", "-q", "-am", "a submodule path outside the repository"]);
    const r = await d.create(dirInput("sub-outside", clone), { env: PROGRESS });
    expect(r.message).toBe("");
    expect(r.ok).toBe(true);
    expect(
      progressLines(r.stderr)
        .filter((p) => p.phase === "submodule-not-initialised")
        .map((p) => (p as { path?: string }).path),
    ).toEqual(["../../x", "libs/absent"]);
    const checkout = workspaceLayout(d.root, "sub-outside").checkout;
    expect(readFileSync(join(checkout, "libs/child/deps/grand/g.txt"), "utf8")).toBe("grand\n");
    expect(gitAsRemoteUser(checkout, ["status", "--porcelain", "--ignore-submodules=none"])).toBe("");
  });
});
