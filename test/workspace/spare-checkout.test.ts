// Spare checkouts over the real sshd: after a create, the host daemon writes a spare checkout of the
// commit beside the project cache, and the next workspace of that commit takes it (one rename, no
// file written). The workspaces stay fully independent (own files, own inodes), and a spare that
// lost or changed a file is never handed out as it is: that workspace gets a fresh checkout.
import { existsSync, mkdirSync, readFileSync, statSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { cachePath } from "../../src/remote-agent/workspace/git-cache.js";
import { agentBundle } from "../../src/transport/bootstrap.js";
import { projectKey } from "../../src/workspace/create-workspace.js";
import { gitIn, LARGE_BIN_SIZE, seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { bytesSent, cliDriver, dirInput, gitAsRemoteUser, type Driver, removeRoot } from "../support/workspace.js";
import { hostGit, onHost } from "../support/host-view.js";

const PROGRESS = { PASEO_SSH_PROGRESS: "1" };

describe("spare checkouts: the next workspace of a commit without writing its files again", { timeout: 120_000 }, () => {
  const fx = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  let d: Driver;
  let spare: string;

  /** Waits (bounded) until the daemon has a spare of the fixture's commit ready. */
  const spareReady = async (): Promise<string> => {
    const deadline = Date.now() + 60_000;
    while (!existsSync(onHost(join(spare, "committed.txt")))) {
      if (Date.now() > deadline) throw new Error(`no spare checkout at ${spare} within 60 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return spare;
  };
  const checkoutOf = (id: string) => workspaceLayout(d.root, id).checkout;
  const ino = (path: string) => statSync(onHost(path)).ino;
  const readDaemonLog = () => readFileSync(onHost(join(d.root, "run", `daemon-${agentBundle().hash}.log`)), "utf8");

  beforeAll(() => {
    base = fx.tmp("paseo-ws-spare-");
    fixture = seedRepo(base);
    d = cliDriver("spare");
    fx.push(() => removeRoot(d.root));
    spare = join(cachePath(d.root, projectKey("fixture-project", fixture.path)), "paseo-spares", fixture.commit);
  });

  it("a second workspace takes the spare: same content and branch, its own files, no objects sent", async () => {
    const first = await d.create(dirInput("spare-a", fixture.path), { env: PROGRESS });
    expect(first.message).toBe("");
    const taken = ino(join(await spareReady(), "committed.txt"));

    const second = await d.create(dirInput("spare-b", fixture.path), { env: PROGRESS });
    expect(second.message).toBe("");
    expect(second.value?.materializedFreshContent).toBe(true);
    expect(bytesSent(second.stderr)).toBe(0);
    const a = checkoutOf("spare-a");
    const b = checkoutOf("spare-b");
    // The spare itself became the checkout (nothing was written again) ...
    expect(ino(join(b, "committed.txt"))).toBe(taken);
    // ... a real repository on the branch, clean, with the committed content.
    expect(hostGit(b, ["symbolic-ref", "--short", "HEAD"]).trim()).toBe("main");
    expect(hostGit(b, ["rev-parse", "HEAD"]).trim()).toBe(fixture.commit);
    expect(hostGit(b, ["status", "--porcelain"])).toBe("");
    expect(readFileSync(onHost(join(b, "large.bin"))).equals(Buffer.alloc(LARGE_BIN_SIZE, 0xa5))).toBe(true);
    expect(statSync(onHost(join(b, "fixture-agent.mjs"))).mode & 0o111).toBe(0o111);

    // Independent: no file is shared, and a write in one workspace is not seen in the other.
    for (const f of ["committed.txt", "large.bin", "fixture-agent.mjs"]) expect(ino(join(b, f))).not.toBe(ino(join(a, f)));
    writeFileSync(onHost(join(b, "committed.txt")), "changed in b\n");
    expect(readFileSync(onHost(join(a, "committed.txt")), "utf8")).toBe("committed\n");
    writeFileSync(onHost(join(a, "large.bin")), "changed in a\n");
    expect(statSync(onHost(join(b, "large.bin"))).size).toBe(LARGE_BIN_SIZE);
    expect(hostGit(a, ["status", "--porcelain"])).toBe(" M large.bin\n");
    expect(hostGit(b, ["status", "--porcelain"])).toBe(" M committed.txt\n");
    expect(gitAsRemoteUser(b, ["status", "--porcelain"])).toBe(" M committed.txt\n");
  });

  /** Spoils the ready spare, then creates `id`: it must get a complete, fresh checkout instead. */
  const afterSpoiling = async (id: string, spoil: (spare: string) => void) => {
    const s = await spareReady();
    const thrownAway = () => (readDaemonLog().match(new RegExp(`spare of ${fixture.commit} thrown away`, "g")) ?? []).length;
    const before = thrownAway();
    spoil(s);
    const r = await d.create(dirInput(id, fixture.path), { env: PROGRESS });
    expect(r.message).toBe("");
    const c = checkoutOf(id);
    expect(readFileSync(onHost(join(c, "committed.txt")), "utf8")).toBe("committed\n");
    expect(hostGit(c, ["status", "--porcelain"])).toBe("");
    // Refused by the adoption check, so written afresh. (Not told by inode: the refused spare is
    // deleted before the fresh checkout writes its files, and the filesystem may reuse its inodes.)
    expect(thrownAway()).toBe(before + 1);
  };

  it("a spare with a file missing is not handed out: that workspace gets a complete fresh checkout", async () => {
    // The second create started a replacement spare in the background.
    await afterSpoiling("spare-c", (s) => unlinkSync(onHost(join(s, "committed.txt"))));
  });

  it("a spare with a changed file is not handed out either", async () => {
    // Same size, other content: only the content check can tell.
    await afterSpoiling("spare-d", (s) => writeFileSync(onHost(join(s, "committed.txt")), "COMMITTED\n"));
  });

  it("a spare whose index no longer is its commit's is not handed out either", async () => {
    // The file and its index entry agree, so only the comparison with the commit can tell.
    await afterSpoiling("spare-e", (s) => {
      writeFileSync(onHost(join(s, "committed.txt")), "COMMITTED\n");
      gitAsRemoteUser(s, ["add", "committed.txt"]);
    });
  });

  // Tampering a workload of another workspace (the same login user) could do; `git status` in the
  // spare shows at most the untracked file, so only a stricter check can tell.
  const tampering: Array<[string, (s: string) => void]> = [
    [
      "assume-unchanged and new content",
      (s) => {
        gitAsRemoteUser(s, ["update-index", "--assume-unchanged", "committed.txt"]);
        writeFileSync(onHost(join(s, "committed.txt")), "planted content\n");
      },
    ],
    [
      "skip-worktree and a deleted file",
      (s) => {
        gitAsRemoteUser(s, ["update-index", "--skip-worktree", "committed.txt"]);
        unlinkSync(onHost(join(s, "committed.txt")));
      },
    ],
    ["an untracked file", (s) => writeFileSync(onHost(join(s, "planted.txt")), "planted\n")],
    [
      "an ignored file",
      (s) => {
        writeFileSync(onHost(join(s, ".git", "info", "exclude")), "planted.log\n");
        writeFileSync(onHost(join(s, "planted.log")), "planted\n");
      },
    ],
    ["an empty untracked directory", (s) => mkdirSync(onHost(join(s, "planted-dir")))],
    ["a hook", (s) => writeFileSync(onHost(join(s, ".git", "hooks", "post-commit")), "#!/bin/sh\ntouch /tmp/planted\n", { mode: 0o755 })],
    ["a config entry", (s) => gitAsRemoteUser(s, ["config", "core.fsmonitor", "touch /tmp/planted"])],
    ["attributes in .git/info", (s) => writeFileSync(onHost(join(s, ".git", "info", "attributes")), "* filter=planted\n")],
    [
      "a replace ref standing in for its commit",
      (s) => {
        // The index, the files and the (replaced) commit agree: only the .git check can tell.
        writeFileSync(onHost(join(s, "committed.txt")), "planted content\n");
        gitAsRemoteUser(s, ["add", "committed.txt"]);
        const tree = gitAsRemoteUser(s, ["write-tree"]).trim();
        const stand = gitAsRemoteUser(s, ["commit-tree", tree, "-m", "planted"]).trim();
        gitAsRemoteUser(s, ["replace", fixture.commit, stand]);
      },
    ],
  ];
  const tamperedId = (name: string) => `spare-t-${name.replace(/[^a-z]+/g, "-")}`;
  const tampered = tampering.map(([name]) => tamperedId(name));
  it.each(tampering)("a spare with %s is not handed out either", async (name, spoil) => {
    await afterSpoiling(tamperedId(name), spoil);
  });

  it("a spare unused for 30 minutes is removed by reconcile; the workspaces stay", async () => {
    const s = await spareReady();
    const old = new Date(Date.now() - 31 * 60_000);
    utimesSync(onHost(s), old, old);
    const ids = ["spare-a", "spare-b", "spare-c", "spare-d", "spare-e", ...tampered];
    expect((await d.reconcile(ids)).ok).toBe(true);
    expect(existsSync(onHost(s))).toBe(false);
    for (const id of ids) expect(hostGit(checkoutOf(id), ["rev-parse", "HEAD"]).trim()).toBe(fixture.commit);
  });
});
