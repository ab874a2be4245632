// A full disk and a dying git child on the host, over the real sshd: the remote root is a small
// tmpfs (the suite runs as root and mounts it for the rig's user), sized per test. Whatever goes
// wrong, a create ends within seconds with one line naming the disk and what is free on it,
// leaves nothing half-made (no workspace directory, staging checkout, pack quarantine, tmp_pack_*
// or manifest temp file), and a create after the cause is gone succeeds.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statfsSync, statSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { cachePath } from "../../src/remote-agent/workspace/git-cache.js";
import { projectKey } from "../../src/workspace/create-workspace.js";
import { lifecycleRequest } from "../support/run-cli.js";
import { hostProcesses, isHostDaemon, waitForProcess } from "../support/host-processes.js";
import { gitIn } from "../fixtures/repo.js";
import { rig } from "../rig/rig.js";
import { needs, unless } from "../support/needs.js";
import { cliDriver, dirInput, startCli, type Driver, type RunningCli } from "../support/workspace.js";

const MiB = 1024 * 1024;
const canMount = { timeout: 120_000, ...unless(needs.tmpfs("the remote root is a small tmpfs, resized per test")) };

function repoOf(base: string, name: string, fill: (dir: string) => void): string {
  const dir = join(base, name);
  mkdirSync(dir, { recursive: true });
  gitIn(dir, ["init", "-q", "-b", "main"]);
  fill(dir);
  // Quiet about the CRLF conversion the attributes below ask for.
  gitIn(dir, ["-c", "core.safecrlf=false", "add", "-A"]);
  gitIn(dir, ["commit", "-q", "-m", name]);
  return realpathSync(dir);
}

/** Waits for a create started with startCli; a hang is cut at `ms` and shows as a failure. */
async function ended(run: RunningCli, ms = 40_000): Promise<{ code: number | null; message: string; stderr: string }> {
  let hung = false;
  const guard = setTimeout(() => {
    hung = true;
    run.child.kill("SIGKILL");
  }, ms);
  const r = await run.done;
  clearTimeout(guard);
  const lines = r.stderr.split("\n").filter((l) => l !== "" && !l.startsWith("{"));
  const message = hung ? `(create still running after ${ms} ms)` : r.code === 0 ? "" : (lines.pop() ?? "");
  return { code: r.code, message, stderr: r.stderr };
}

describe("a full disk and a killed git child during create (tmpfs root)", canMount, () => {
  const s = suite("all");
  let base: string;
  let d: Driver;
  let mnt: string;
  let randomRepo: string;
  let crlfRepo: string;

  const usedBytes = () => {
    const st = statfsSync(mnt);
    return (st.blocks - st.bfree) * st.bsize;
  };
  /** Resizes the tmpfs so that `bytes` are free now. */
  const setFree = (bytes: number) => {
    const size = Math.ceil((usedBytes() + bytes) / 4096) * 4;
    execFileSync("mount", ["-o", `remount,size=${size}k`, mnt]);
  };
  const fillers = () =>
    readdirSync(mnt)
      .filter((n) => n.startsWith("filler-"))
      .map((n) => join(mnt, n));
  /**
   * Takes every free byte with root-owned files. A create may be writing meanwhile, so what statfs
   * called free may be gone by the time fallocate asks for it (then nothing is allocated): measure
   * again and take what is left, until less than 64 KiB is.
   */
  const fillDisk = () => {
    for (let i = 0; i < 100; i++) {
      const st = statfsSync(mnt);
      const free = st.bavail * st.bsize;
      if (free < 64 * 1024) return;
      try {
        execFileSync("fallocate", ["-l", String(free), join(mnt, `filler-${i}`)], { stdio: "ignore" });
      } catch {
        rmSync(join(mnt, `filler-${i}`), { force: true });
      }
    }
    throw new Error(`the disk at ${mnt} could not be filled`);
  };
  const cacheOf = (projectId: string, repo: string) => cachePath(d.root, projectKey(projectId, repo));
  /** What a failed create must not leave: any workspace dir but `keep`, tmp entries, half packs, temp files. */
  const leftovers = (keep: string[] = []): string[] => {
    const kept = new Set(keep.map((id) => workspaceLayout(d.root, id).dir));
    const found: string[] = [];
    const list = (dir: string) => (existsSync(dir) ? readdirSync(dir).map((n) => join(dir, n)) : []);
    for (const p of list(join(d.root, "workspaces"))) if (!kept.has(p)) found.push(p);
    found.push(...list(join(d.root, "tmp")));
    for (const c of list(join(d.root, "cache")).filter((p) => p.endsWith(".git"))) {
      found.push(...list(join(c, "objects", "pack")).filter((p) => /\/tmp_|\.tmp$/.test(p)));
    }
    for (const w of kept) found.push(...list(w).filter((p) => /\.tmp$|create\.lock/.test(p)));
    return found;
  };
  const startCreate = (id: string, repo: string, projectId: string): RunningCli =>
    startCli(
      ["create", "--workspace-id", id],
      lifecycleRequest(d.options, {
        input: dirInput(id, repo, { kind: "existing" }, { project: { projectId, source: { kind: "directory", path: repo } } }),
      }),
      { PASEO_SSH_PROGRESS: "1" },
    );
  const create = (id: string, repo: string, projectId: string) => ended(startCreate(id, repo, projectId));

  beforeAll(() => {
    base = s.tmp("paseo-ws-disk-");
    // 16 MiB that does not compress: as many bytes of objects as of checkout.
    randomRepo = repoOf(base, "random", (dir) => {
      for (let i = 0; i < 16; i++) writeFileSync(join(dir, `blob-${i}.bin`), randomBytes(MiB));
    });
    // A checkout twice the size of its tree: every LF becomes CRLF. The tree estimate cannot know.
    crlfRepo = repoOf(base, "crlf", (dir) => {
      writeFileSync(join(dir, ".gitattributes"), "* text eol=crlf\n");
      for (let i = 0; i < 150; i++) writeFileSync(join(dir, `small-${i}.txt`), `small ${i}\n`);
      writeFileSync(join(dir, "big.txt"), "\n".repeat(6 * MiB));
    });
    d = cliDriver("disk");
    mnt = d.root;
    s.push(() => rmSync(mnt, { recursive: true, force: true }));
    mkdirSync(mnt, { recursive: true });
    const uid = statSync(rig().remoteHome!).uid;
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=256m,uid=${uid},gid=${statSync(rig().remoteHome!).gid},mode=0700`, "tmpfs", mnt]);
    s.push(() => execFileSync("umount", ["-l", mnt]));
  });

  it("a workspace that cannot fit is refused before any object is sent; with room, the same create succeeds", async () => {
    // Installs the agent while there is room, so the limit below is the workspace's alone.
    expect((await d.inspect("disk-none")).ok).toBe(true);
    setFree(24 * MiB);
    const r = await create("disk-early", randomRepo, "disk-early");
    expect(r.message).toMatch(
      new RegExp(
        `^Not enough disk space on the remote host: the disk at ${mnt} has 2\\d\\.\\d MiB free; this workspace \\(1\\d\\.\\d MiB of objects, a 1\\d\\.\\d MiB checkout\\) needs about 3\\d\\.\\d MiB$`,
      ),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(/"phase":"objects-sent"/);
    expect(leftovers()).toEqual([]);
    expect(readdirSync(join(cacheOf("disk-early", randomRepo), "objects", "pack"))).toEqual([]);

    setFree(80 * MiB);
    const ok = await create("disk-early", randomRepo, "disk-early");
    expect(ok.message).toBe("");
    expect(ok.code).toBe(0);
    expect(gitIn(workspaceLayout(d.root, "disk-early").checkout, ["status", "--porcelain"])).toBe("");
    expect((await d.op("destroy", "disk-early")).ok).toBe(true);
  });

  /** Creates `id` (a project of its own, so objects must travel) and acts on index-pack once it runs. */
  const duringTransfer = async (id: string, act: (indexPackPid: number) => void) => {
    setFree(100 * MiB);
    const run = startCreate(id, randomRepo, id);
    const indexPack = await waitForProcess((p) => p.argv.includes("index-pack") && p.cwd === cacheOf(id, randomRepo));
    act(indexPack.pid);
    return ended(run);
  };
  const retrySucceeds = async (id: string) => {
    const ok = await create(id, randomRepo, id);
    expect(ok.message).toBe("");
    expect(gitIn(workspaceLayout(d.root, id).checkout, ["status", "--porcelain"])).toBe("");
    expect((await d.op("destroy", id)).ok).toBe(true);
  };

  it("a disk that fills up mid-transfer ends the create at once with the disk line and rolls back; a retry succeeds", async () => {
    const r = await duringTransfer("disk-fill", fillDisk);
    expect(r.message).toMatch(
      new RegExp(`^The remote host ran out of disk space while receiving objects: the disk at ${mnt} has \\d+ KiB free$`),
    );
    expect(r.code).toBe(1);
    expect(leftovers()).toEqual([]);
    expect(hostProcesses().filter((p) => p.cwd?.startsWith(mnt) && !isHostDaemon(p))).toEqual([]);
    for (const f of fillers()) rmSync(f);
    await retrySucceeds("disk-fill");
  });

  it("index-pack killed mid-transfer ends the create at once, frees the lock and rolls back; a retry succeeds", async () => {
    const r = await duringTransfer("disk-kill", (pid) => process.kill(pid, "SIGKILL"));
    expect(r.message).toBe("Receiving objects on the remote host failed: git index-pack failed (killed by SIGKILL)");
    expect(r.code).toBe(1);
    expect(leftovers()).toEqual([]);
    await retrySucceeds("disk-kill");
  });

  it("a checkout that did not fit after all is never ready: one line, rolled back; with room it succeeds", async () => {
    setFree(10 * MiB);
    const r = await create("disk-crlf", crlfRepo, "disk-crlf");
    expect(r.message).toMatch(
      new RegExp(
        `^Checkout incomplete on the remote host: 1 of 152 files could not be written \\(big.txt\\); the disk at ${mnt} has \\d+\\.\\d MiB free$`,
      ),
    );
    expect(r.code).toBe(1);
    expect(leftovers()).toEqual([]);
    expect((await d.inspect("disk-crlf")).value?.inspection).toEqual({ status: "missing" });

    setFree(40 * MiB);
    const ok = await create("disk-crlf", crlfRepo, "disk-crlf");
    expect(ok.message).toBe("");
    const checkout = workspaceLayout(d.root, "disk-crlf").checkout;
    expect(statSync(join(checkout, "big.txt")).size).toBe(12 * MiB);
    expect(gitIn(checkout, ["status", "--porcelain"])).toBe("");
    expect((await d.op("destroy", "disk-crlf")).ok).toBe(true);
  });

  it("with the objects already on the host, a checkout that cannot fit is refused before it starts", async () => {
    // The cache holds the commit from the test before: only the checkout needs room.
    setFree(4 * MiB);
    const r = await create("disk-cached", crlfRepo, "disk-crlf");
    expect(r.message).toMatch(
      new RegExp(
        `^Not enough disk space on the remote host: the disk at ${mnt} has 4\\.0 MiB free; the checkout needs about [78]\\.\\d MiB$`,
      ),
    );
    expect(r.stderr).toMatch(/"phase":"objects-sent","bytes":0/);
    expect(leftovers()).toEqual([]);
  });

  it("a disk full before the claim leaves no directory and no manifest temp file; a retry after freeing space succeeds", async () => {
    setFree(40 * MiB);
    fillDisk();
    const r = await create("disk-claim", crlfRepo, "disk-crlf");
    expect(r.message).toMatch(
      new RegExp(`^The remote host ran out of disk space while claiming the workspace: the disk at ${mnt} has \\d+ KiB free$`),
    );
    expect(leftovers()).toEqual([]);

    for (const f of fillers()) rmSync(f);
    const ok = await create("disk-claim", crlfRepo, "disk-crlf");
    expect(ok.message).toBe("");
    expect(readFileSync(join(workspaceLayout(d.root, "disk-claim").checkout, "small-1.txt"), "utf8")).toBe("small 1\r\n");
    expect(leftovers(["disk-claim"])).toEqual([]);
    expect((await d.op("destroy", "disk-claim")).ok).toBe(true);
  });
});
