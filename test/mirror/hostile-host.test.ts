// What a hostile or broken host reports about a workspace's work is its word only: before anything
// is written into the Paseo side repository, the record of where the work goes must carry this
// machine's seal for exactly that workspace, every branch name must be one git accepts (so no
// crafted name leaves refs/paseo-ssh/<workspace>/ or addresses another ref), every id must be a
// full commit id, and a flood of branches is refused. A fake host answers the work-state (these
// are checks of pure logic before any transfer); the local repository is a real one and must be
// left exactly as it was.
import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { bringBack, MAX_BRANCHES } from "../../src/mirror/bring-back.js";
import { sealWorkHome } from "../../src/mirror/seal.js";
import { isSafeBranchName, workNamespace } from "../../src/mirror/ref-names.js";
import type { RemoteHost } from "../../src/transport/host.js";
import type { WorkState } from "../../src/shared/agent-api.js";
import { gitIn, seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { OWNER } from "../support/workspace.js";

describe("a host's report of a workspace's work is checked before anything local changes", () => {
  const s = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  const savedState = process.env.XDG_STATE_HOME;
  beforeAll(() => {
    base = s.tmp("paseo-hostile-work-");
    mkdirSync(join(base, "state"), { mode: 0o700 });
    process.env.XDG_STATE_HOME = join(base, "state");
    s.push(() => {
      if (savedState === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = savedState;
    });
    fixture = seedRepo(base);
  });

  const host: RemoteHost = {
    root: "/nowhere",
    reattachable: false,
    call: () => Promise.reject(new Error("no call expected")),
    openAgent: () => Promise.reject(new Error("no transfer expected")),
    openPty: () => Promise.reject(new Error("no PTY expected")),
    close: () => undefined,
  };
  const state = (over: Partial<WorkState>): WorkState => ({
    workspaceId: "w",
    owner: OWNER,
    createdFrom: fixture.commit,
    workHome: sealWorkHome(join(fixture.path, ".git"), { owner: OWNER, workspaceId: "w", commit: fixture.commit }),
    head: fixture.commit,
    headRef: "refs/heads/main",
    branches: [{ name: "main", commit: fixture.commit }],
    uncommitted: null,
    token: "t",
    ...over,
  });
  const refs = () => gitIn(fixture.path, ["for-each-ref", "--format=%(refname) %(objectname)"]);

  it.each([
    ["../heads/main"],
    ["x/../../../heads/main"],
    ["-upload-pack"],
    ["a..b"],
    ["HEAD@{1}"],
    ["with space"],
    ["/abs"],
    ["trailing/"],
    [".hidden"],
    ["x.lock"],
    ["a\\b"],
    ["tab\there"],
  ])("a branch named %j is refused and nothing local changes", async (name) => {
    const before = refs();
    await expect(bringBack(host, state({ branches: [{ name, commit: fixture.commit }] }))).rejects.toThrow(
      /^the host's report of workspace w's work was refused: branch name .* is not a valid branch name; nothing local was changed$/,
    );
    expect(refs()).toBe(before);
  });

  it("ids that are not full commit ids, a HEAD outside refs/heads and a flood of branches are refused", async () => {
    const before = refs();
    const cases: [Partial<WorkState>, string][] = [
      [{ head: "HEAD~1" }, "HEAD is not a commit id"],
      [{ branches: [{ name: "b", commit: "--upload-pack=x" }] }, "branch b is not a commit id"],
      [{ uncommitted: { commit: "0123", tree: "0123" } }, "the uncommitted work is not a commit id"],
      [{ headRef: "refs/remotes/origin/main" }, "HEAD names something other than a branch"],
      [
        {
          branches: [
            { name: "b", commit: fixture.commit },
            { name: "b", commit: fixture.commit },
          ],
        },
        "branch b is named twice",
      ],
      [
        { branches: Array.from({ length: MAX_BRANCHES + 1 }, (_, i) => ({ name: `b${i}`, commit: fixture.commit })) },
        `it names ${MAX_BRANCHES + 1} branches, more than ${MAX_BRANCHES}`,
      ],
    ];
    for (const [over, why] of cases) {
      await expect(bringBack(host, state(over))).rejects.toThrow(
        `the host's report of workspace w's work was refused: ${why}; nothing local was changed`,
      );
    }
    expect(refs()).toBe(before);
  });

  it("a record of where the work goes that this machine did not seal for this workspace is refused", async () => {
    const before = refs();
    const other = mkdtempSync(join(base, "other-"));
    gitIn(other, ["init", "-q"]);
    const forOther = sealWorkHome(join(fixture.path, ".git"), { owner: OWNER, workspaceId: "another", commit: fixture.commit });
    for (const workHome of [
      { gitDir: join(other, ".git"), seal: forOther.seal },
      forOther,
      { gitDir: join(fixture.path, ".git"), seal: "0".repeat(64) },
    ]) {
      await expect(bringBack(host, state({ workHome }))).rejects.toThrow(
        /was not sealed by this machine for it .*nothing local was changed$/,
      );
    }
    expect(refs()).toBe(before);
  });

  it("a branch the host names like an existing local one lands only in the namespace; the local branch stays", async () => {
    gitIn(fixture.path, ["branch", "-f", "side", fixture.commit]);
    const child = gitIn(fixture.path, ["commit-tree", `${fixture.commit}^{tree}`, "-p", fixture.commit, "-m", "host's"]).trim();
    const r = await bringBack(
      host,
      state({
        head: child,
        branches: [
          { name: "main", commit: child },
          { name: "side", commit: child },
        ],
      }),
    );
    expect(r.branches).toEqual([
      { name: "main", local: "left" },
      { name: "side", local: "left" },
    ]);
    expect(gitIn(fixture.path, ["rev-parse", "main", "side"]).trim().split("\n")).toEqual([fixture.commit, fixture.commit]);
    expect(gitIn(fixture.path, ["rev-parse", `${workNamespace("w")}/heads/main`]).trim()).toBe(child);
  });

  it("namespaces come from the workspace id, never from the host, and stay one ref component", () => {
    expect(workNamespace("wb-1")).toBe("refs/paseo-ssh/wb-1");
    for (const id of ["../x", "a/b", "x..y", "héllo", "-x", ""]) expect(workNamespace(id)).toMatch(/^refs\/paseo-ssh\/ws-[0-9a-f]{20}$/);
    expect(isSafeBranchName("agent/feature-1.2")).toBe(true);
  });
});
