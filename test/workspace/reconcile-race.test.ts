// Reconcile against a create that starts while it runs, over the real sshd. Reconcile decides
// which caches are unused from the manifests it read at its start; a create that claims a
// workspace and starts borrowing an old, unused cache after that read must keep its cache. The
// test holds reconcile still (SIGSTOP, as root) while it is busy removing an orphan, runs the
// create in between, and lets reconcile finish.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, realpathSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { cachePath } from "../../src/remote-agent/workspace/git-cache.js";
import { projectKey } from "../../src/workspace/create-workspace.js";
import { gitIn, seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { hostProcesses } from "../support/host-processes.js";
import { rig } from "../rig/rig.js";
import { cliDriver, dirInput, type Driver, removeRoot } from "../support/workspace.js";
import { needs, unless } from "../support/needs.js";

const canSignal = unless(needs.localHost("signals the host's processes"), needs.root("signals the rig's login user's processes"));

describe("reconcile racing a create over SSH", canSignal, () => {
  const s = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  let other: FixtureRepo;
  let d: Driver;

  beforeAll(() => {
    base = s.tmp("paseo-ws-race-");
    for (const sub of ["a", "b"]) mkdirSync(join(base, sub));
    fixture = seedRepo(join(base, "a"));
    other = seedRepo(join(base, "b"));
    d = cliDriver("race");
    s.push(() => removeRoot(d.root));
  });

  it("a cache a create starts using while reconcile runs is not deleted under it", { timeout: 120_000 }, async () => {
    // The project's cache exists, no workspace uses it, and it looks old: a pruning candidate.
    expect((await d.create(dirInput("race-old", fixture.path))).ok).toBe(true);
    expect((await d.op("destroy", "race-old")).ok).toBe(true);
    const cache = cachePath(d.root, projectKey("fixture-project", realpathSync(fixture.path)));
    const hourAgo = new Date(Date.now() - 3600_000);
    utimesSync(cache, hourAgo, hourAgo);

    // An orphan of another project, made slow to delete, keeps reconcile busy after its scan.
    const orphan = dirInput(
      "race-orphan",
      other.path,
      { kind: "existing" },
      { project: { projectId: "other", source: { kind: "directory", path: other.path } } },
    );
    expect((await d.create(orphan)).ok).toBe(true);
    const bulk = join(workspaceLayout(d.root, "race-orphan").checkout, "bulk");
    mkdirSync(bulk);
    for (let i = 0; i < 20_000; i++) writeFileSync(join(bulk, `f${i}`), "");
    const owner = statSync(d.root);
    execFileSync("chown", ["-R", `${owner.uid}:${owner.gid}`, bulk]);

    const reconcile = d.reconcile([]);
    const tmp = join(d.root, "tmp");
    const orphanKey = workspaceLayout(d.root, "race-orphan").key;
    const trash = () => (existsSync(tmp) ? readdirSync(tmp).find((n) => n.startsWith(`trash-${orphanKey}-`)) : undefined);
    for (let i = 0; i < 6000 && !trash(); i++) await new Promise((r) => setTimeout(r, 5));
    const stopped = hostProcesses()
      .filter((p) => p.argv.some((a) => a.startsWith(`${d.root}/agent/`)))
      .map((p) => p.pid);
    for (const pid of stopped) process.kill(pid, "SIGSTOP");
    try {
      // Reconcile is held while still deleting the orphan, after it read every manifest.
      expect(trash()).toBeDefined();
      const created = await d.create(dirInput("race-new", fixture.path), { env: { PASEO_SSH_NO_BROKER: "1" } });
      expect(created.message).toBe("");
    } finally {
      for (const pid of stopped) process.kill(pid, "SIGCONT");
    }
    const r = await reconcile;
    expect(r.ok).toBe(true);
    expect(existsSync(workspaceLayout(d.root, "race-orphan").dir)).toBe(false);

    // The new workspace's objects are still there: its checkout borrows them from the cache.
    expect(existsSync(join(cache, "objects"))).toBe(true);
    const checkout = workspaceLayout(d.root, "race-new").checkout;
    expect(gitIn(checkout, ["rev-parse", "HEAD"]).trim()).toBe(fixture.commit);
    expect(gitIn(checkout, ["status", "--porcelain"])).toBe("");
    const destroyed = await d.op("destroy", "race-new");
    expect(destroyed.message).toBe("");
    expect(destroyed.ok).toBe(true);
  });
});
