// merge-to-base against a host that lies: the remote manifest says where a workspace's work is
// merged on the Paseo host, and a compromised host can rewrite it. Over the real sshd, the
// manifest is altered (as root) to name another local repository, another branch, or an unsealed
// target: each is refused and no local ref moves; the genuine record still merges. The head the
// host reports is checked as a full object id (unit tests with a host that answers anything).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { mergeToBase } from "../../src/workspace/fast-forward-base.js";
import { sealIntegration } from "../../src/mirror/seal.js";
import type { RemoteHost } from "../../src/transport/host.js";
import type { MergeInfo } from "../../src/shared/agent-api.js";
import { gitIn, localRepoFingerprint, seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { cliDriver, dirInput, gitAsRemoteUser, OWNER, type Driver, removeRoot } from "../support/workspace.js";
import { onHost } from "../support/host-view.js";

describe("merge-to-base with a host that rewrites its manifest", () => {
  const s = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  let other: string;
  let d: Driver;

  beforeAll(() => {
    base = s.tmp("paseo-ws-tamper-");
    fixture = seedRepo(base);
    // Another local repository with the same history: a fast-forward there would succeed.
    other = join(base, "other");
    gitIn(base, ["clone", "-q", fixture.path, other]);
    d = cliDriver("tamper");
    s.push(() => removeRoot(d.root));
  });

  it("a target moved to another repository or branch, or unsealed, is refused and nothing local moves", async () => {
    expect((await d.create(dirInput("tamper", fixture.path))).ok).toBe(true);
    const checkout = workspaceLayout(d.root, "tamper").checkout;
    writeFileSync(onHost(join(checkout, "committed.txt")), "from the workspace\n");
    gitAsRemoteUser(checkout, ["commit", "-q", "-am", "workspace work"]);
    const head = gitAsRemoteUser(checkout, ["rev-parse", "HEAD"]).trim();
    gitIn(fixture.path, ["branch", "side"]);

    const manifest = workspaceLayout(d.root, "tamper").manifest;
    const genuine = readFileSync(onHost(manifest), "utf8");
    const rewrite = (integration: Record<string, unknown>) => {
      const m = JSON.parse(genuine) as { integration: Record<string, unknown> };
      writeFileSync(onHost(manifest), JSON.stringify({ ...m, integration: { ...m.integration, ...integration } }, null, 2) + "\n");
    };
    // The live mirror may bring the workspace's commit back meanwhile: its own refs are not "moves".
    const refs = () => [localRepoFingerprint(fixture.path).refs, localRepoFingerprint(other).refs];
    const before = refs();
    const refused = `merge-to-base refused: the host's record of where workspace tamper merges was not sealed by this machine for it (altered on the host, or created elsewhere or by an older version)`;

    for (const lie of [{ localPath: other }, { baseBranch: "side" }, { seal: undefined }]) {
      rewrite(lie);
      const r = await d.op("merge-to-base", "tamper");
      expect(r.message).toBe(refused);
      expect(r.exitCode).toBe(1);
      expect(refs()).toEqual(before);
    }

    writeFileSync(onHost(manifest), genuine);
    const ok = await d.op("merge-to-base", "tamper");
    expect(ok.stdout).toBe(`{"type":"merge-to-base","protocolVersion":1,"localIntegrationTarget":${JSON.stringify(fixture.path)}}\n`);
    expect(gitIn(fixture.path, ["rev-parse", "main"]).trim()).toBe(head);
    expect(gitIn(other, ["rev-parse", "main"]).trim()).toBe(fixture.commit);
    expect((await d.op("destroy", "tamper")).ok).toBe(true);
  });
});

describe("merge-to-base checks the commit ids the host reports", () => {
  const s = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  const savedState = process.env.XDG_STATE_HOME;

  beforeAll(() => {
    base = s.tmp("paseo-ws-head-");
    mkdirSync(join(base, "state"), { mode: 0o700 });
    process.env.XDG_STATE_HOME = join(base, "state");
    s.push(() => {
      if (savedState === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = savedState;
    });
    fixture = seedRepo(base);
  });

  /** A host whose merge-info answer is `info`; any further conversation is a test failure. */
  const host = (info: unknown): RemoteHost => ({
    root: "/nowhere",
    reattachable: false,
    call: async () => info as never,
    openAgent: () => Promise.reject(new Error("no agent conversation expected")),
    openPty: () => Promise.reject(new Error("no PTY expected")),
    close: () => undefined,
  });

  it.each(["--upload-pack=touch /tmp/pwned", "HEAD~1", "main", "0123"])(
    "a head of %j is refused before any local git runs",
    async (head) => {
      const integration = sealIntegration(fixture.path, "main", { owner: OWNER, workspaceId: "w", commit: fixture.commit });
      const info: MergeInfo = { head, createdFrom: fixture.commit, integration };
      await expect(mergeToBase(host(info), OWNER, "w")).rejects.toThrow(
        "merge-to-base refused: the host reported malformed commit ids for workspace w",
      );
      expect(gitIn(fixture.path, ["rev-parse", "main"]).trim()).toBe(fixture.commit);
    },
  );

  it("a missing or malformed target is refused", async () => {
    for (const integration of [null, "x", { localPath: fixture.path, baseBranch: "main", seal: "00" }]) {
      await expect(mergeToBase(host({ head: fixture.commit, createdFrom: fixture.commit, integration }), OWNER, "w")).rejects.toThrow(
        /^merge-to-base refused: the host's record of where workspace w merges was not sealed/,
      );
    }
  });
});
