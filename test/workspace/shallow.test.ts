// Shallow sources over the real sshd: a `--depth 1` clone (what CI checkouts are) gives a workspace
// with the same shallow history (`git log` lists what it lists locally); after the source is
// deepened, or gets a newer commit, a create sends only what the host lacks, and the workspace's
// history follows the source's again.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { commitAll, gitIn, localRepoFingerprint, treeSnapshot } from "../fixtures/repo.js";
import { shallowSource } from "../fixtures/submodules.js";
import { bytesSent, cliDriver, dirInput, gitAsRemoteUser, type Driver, removeRoot } from "../support/workspace.js";

const PROGRESS = { PASEO_SSH_PROGRESS: "1" };

describe("shallow sources over SSH", () => {
  const s = suite("all");
  let base: string;
  let src: ReturnType<typeof shallowSource>;
  let d: Driver;

  beforeAll(() => {
    base = s.tmp("paseo-ws-shallow-");
    src = shallowSource(base, 6);
    d = cliDriver("shallow");
    s.push(() => removeRoot(d.root));
  });

  const log = (cwd: string, remote = false) => {
    const args = ["log", "--format=%H %s"];
    return remote ? gitAsRemoteUser(cwd, args) : gitIn(cwd, args);
  };
  /** A self-contained pack of everything the source's HEAD reaches locally. */
  const fullPack = () => execFileSync("git", ["pack-objects", "--revs", "--stdout", "-q"], { cwd: src.clone, input: "HEAD\n" }).length;

  /** Creates `id` and checks its history is the source's; returns the object bytes sent. */
  const createMatching = async (id: string): Promise<number> => {
    const r = await d.create(dirInput(id, src.clone), { env: PROGRESS });
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, id).checkout;
    expect(log(checkout, true)).toBe(log(src.clone));
    expect(gitAsRemoteUser(checkout, ["rev-parse", "--is-shallow-repository"]).trim()).toBe("true");
    expect(gitAsRemoteUser(checkout, ["status", "--porcelain"])).toBe("");
    return bytesSent(r.stderr);
  };

  it("a depth-1 source: the workspace keeps its boundary (`git log` equal), the local repository untouched", async () => {
    const before = localRepoFingerprint(src.clone);
    const gitDirBefore = treeSnapshot(join(src.clone, ".git"));
    expect(log(src.clone).split("\n").filter(Boolean)).toHaveLength(1);
    expect(await createMatching("sh-a")).toBeGreaterThan(0);
    // The snapshot first: `git status` (in the fingerprint) may refresh the index itself.
    expect(treeSnapshot(join(src.clone, ".git"))).toBe(gitDirBefore);
    expect(localRepoFingerprint(src.clone)).toEqual(before);
    expect(await createMatching("sh-b")).toBe(0);
  });

  it("deepened locally: the same commit's history below the boundary is sent, only that", async () => {
    gitIn(src.clone, ["fetch", "-q", "--deepen=3"]);
    expect(log(src.clone).split("\n").filter(Boolean)).toHaveLength(4);
    const delta = await createMatching("sh-c");
    const full = fullPack();
    expect(delta).toBeGreaterThan(0);
    expect(delta).toBeLessThan(full);
    console.log(`deepened by 3 commits: ${delta} bytes sent (a full pack of the history is ${full})`);
    expect(await createMatching("sh-d")).toBe(0);
    // The first workspace keeps the history it was created with.
    expect(log(workspaceLayout(d.root, "sh-a").checkout, true).split("\n").filter(Boolean)).toHaveLength(1);
  });

  it("a submodule cloned shallow keeps its boundary too", async () => {
    const superPath = join(base, "super-of-shallow");
    gitIn(base, ["init", "-q", "-b", "main", superPath]);
    gitIn(superPath, ["-c", "protocol.file.allow=always", "submodule", "add", "-q", "--depth", "1", `file://${src.upstream}`, "mod"]);
    commitAll(superPath, "shallow submodule");
    const mod = join(superPath, "mod");
    expect(gitIn(mod, ["rev-parse", "--is-shallow-repository"]).trim()).toBe("true");
    const r = await d.create(dirInput("sh-sub", superPath), { env: PROGRESS });
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, "sh-sub").checkout;
    expect(log(join(checkout, "mod"), true)).toBe(log(mod));
    expect(gitAsRemoteUser(join(checkout, "mod"), ["rev-parse", "--is-shallow-repository"]).trim()).toBe("true");
    expect(gitAsRemoteUser(checkout, ["submodule", "status", "--recursive"])).toMatch(/^ [0-9a-f]{40} mod /);
    expect(gitAsRemoteUser(checkout, ["status", "--porcelain"])).toBe("");
  });

  it("a newer commit: only its delta is sent, on the old boundary or a new one", async () => {
    writeFileSync(join(src.work, "f7.txt"), "7\n");
    commitAll(src.work, "commit 7");
    gitIn(base, ["--git-dir", src.upstream, "fetch", "-q", src.work, "main:main"]);
    gitIn(src.clone, ["fetch", "-q"]);
    gitIn(src.clone, ["merge", "-q", "--ff-only", "origin/main"]);
    expect(log(src.clone).split("\n").filter(Boolean)).toHaveLength(5);
    const delta = await createMatching("sh-e");
    expect(delta).toBeGreaterThan(0);
    expect(delta).toBeLessThan(fullPack());
    console.log(`newer commit on the same boundary: ${delta} bytes sent`);
    // Fetched with --depth 1 instead (a CI checkout of the next commit): the boundary moves up.
    writeFileSync(join(src.work, "f8.txt"), "8\n");
    commitAll(src.work, "commit 8");
    gitIn(base, ["--git-dir", src.upstream, "fetch", "-q", src.work, "main:main"]);
    gitIn(src.clone, ["fetch", "-q", "--depth", "1"]);
    gitIn(src.clone, ["reset", "-q", "--hard", "origin/main"]);
    expect(log(src.clone).split("\n").filter(Boolean)).toHaveLength(1);
    const next = await createMatching("sh-f");
    expect(next).toBeGreaterThan(0);
    expect(next).toBeLessThan(fullPack());
    console.log(`next commit fetched with --depth 1: ${next} bytes sent`);
  });
});
