// Git LFS through the built CLI over the real sshd: LFS files arrive with their content from the
// Paseo side's LFS store (no LFS server anywhere), into a per-project store on the host that a
// second workspace needs nothing more for; with git-lfs hidden from the host's PATH they arrive as
// pointers with a clean status and doctor says so; an object the Paseo side lacks stays a pointer
// and the create's progress names it; an LFS filter that hangs holding git's stderr cannot hang the
// create (issue 30 item 8). The rig's host is this machine, so git-lfs must be installed here for
// any of it.
import { execFileSync, spawnSync } from "node:child_process";
import { createServer, type AddressInfo, type Socket } from "node:net";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { gitIn, localRepoFingerprint } from "../fixtures/repo.js";
import { cliDriver, dirInput, progressLines, type Driver, removeRoot } from "../support/workspace.js";
import { setHostGit, setHostGitSearchPath } from "../support/test-hooks.js";
import { LFS_HELD_FILE } from "../../src/remote-agent/test-hooks.js";
import { sleep } from "../../src/shared/async.js";
import { requireView } from "../support/host-view.js";
import { runCli } from "../support/run-cli.js";
import { rig } from "../rig/rig.js";
import { cachePath } from "../../src/remote-agent/workspace/git-cache.js";
import { lfsObjectPath } from "../../src/remote-agent/workspace/lfs-store.js";
import { projectKey } from "../../src/workspace/create-workspace.js";
import { needs, unless } from "../support/needs.js";

const which = (name: string) =>
  execFileSync("sh", ["-c", `command -v ${name}`])
    .toString()
    .trim();
const GIT = which("git");
const SETPRIV = which("setpriv");
/** The lfs filter as `git lfs install` configures it (the fixture's git runs without system config). */
const LFS_FILTER = [
  "-c",
  "filter.lfs.clean=git-lfs clean -- %f",
  "-c",
  "filter.lfs.process=git-lfs filter-process",
  "-c",
  "filter.lfs.required=true",
];
/** Where no LFS server listens: any fetch from it fails at once. */
const DEAD_ORIGIN = "http://127.0.0.1:9/team/models";

interface LfsRepo {
  path: string;
  model: Buffer;
  weights: Buffer;
}

function lfsRepo(parent: string): LfsRepo {
  const path = join(parent, "lfs-repo");
  mkdirSync(path);
  gitIn(path, ["init", "-q", "-b", "main"]);
  gitIn(path, ["remote", "add", "origin", DEAD_ORIGIN]);
  writeFileSync(join(path, ".gitattributes"), "*.bin filter=lfs diff=lfs merge=lfs -text\n");
  const model = randomBytes(300_000);
  const weights = randomBytes(120_000);
  mkdirSync(join(path, "nested dir"));
  writeFileSync(join(path, "model.bin"), model);
  writeFileSync(join(path, "nested dir", "weights.bin"), weights);
  writeFileSync(join(path, "readme.txt"), "plain\n");
  gitIn(path, [...LFS_FILTER, "add", "-A"]);
  gitIn(path, ["commit", "-q", "-m", "lfs"]);
  return { path, model, weights };
}

/**
 * A superproject (no LFS of its own) whose submodule libs/models has an LFS file, its object in
 * the superproject's `.git/modules/libs/models/lfs` as a clone with git-lfs leaves it, and whose
 * .gitmodules URL is `url`.
 */
function lfsSubmoduleRepo(parent: string, url: string): { path: string; model: Buffer } {
  const models = join(parent, "models-work");
  mkdirSync(models);
  gitIn(models, ["init", "-q", "-b", "main"]);
  writeFileSync(join(models, ".gitattributes"), "*.bin filter=lfs diff=lfs merge=lfs -text\n");
  const model = randomBytes(200_000);
  writeFileSync(join(models, "model.bin"), model);
  gitIn(models, [...LFS_FILTER, "add", "-A"]);
  gitIn(models, ["commit", "-q", "-m", "models"]);
  const path = join(parent, "lfs-super");
  mkdirSync(path);
  gitIn(path, ["init", "-q", "-b", "main"]);
  writeFileSync(join(path, "top.txt"), "top\n");
  gitIn(path, ["-c", "protocol.file.allow=always", "submodule", "add", "-q", models, "libs/models"]);
  execFileSync("cp", ["-a", join(models, ".git", "lfs"), join(path, ".git", "modules", "libs", "models")]);
  gitIn(path, ["config", "--file", ".gitmodules", "submodule.libs/models.url", url]);
  gitIn(path, ["add", "-A"]);
  gitIn(path, ["commit", "-q", "-m", "super"]);
  execFileSync("chmod", ["-R", "a+rX", parent]);
  return { path, model };
}

/** Runs git in a remote checkout as its owner, on `path` (the system config's lfs filter applies). */
function remoteGit(checkout: string, args: string[], path = process.env.PATH ?? ""): string {
  const st = statSync(checkout);
  return execFileSync(SETPRIV, [`--reuid=${st.uid}`, `--regid=${st.gid}`, "--init-groups", GIT, ...args], {
    cwd: checkout,
    env: { PATH: path, HOME: "/tmp" },
  }).toString();
}

function lfsMark(stderr: string, phase: string): Record<string, unknown> | undefined {
  return progressLines(stderr).find((p) => p.phase === phase) as Record<string, unknown> | undefined;
}

const POINTER = /^version https:\/\/git-lfs\.github\.com\/spec\/v1\noid sha256:[0-9a-f]{64}\nsize \d+\n$/;

describe(
  "Git LFS over SSH",
  unless(needs.command("git-lfs"), needs.localHost("hides git-lfs from the host's PATH and reads the host's LFS store directly")),
  () => {
    const cleanups = suite("all");
    let base: string;
    let repo: LfsRepo;
    const driver = (label: string) => {
      const d = cliDriver(label);
      cleanups.push(() => removeRoot(d.root));
      return d;
    };
    const progress = { env: { PASEO_SSH_PROGRESS: "1" } };

    beforeAll(() => {
      base = cleanups.tmp("paseo-ws-lfs-");
      chmodSync(base, 0o755);
      repo = lfsRepo(base);
    });

    it("git-lfs on the host, no LFS server: content from the local store, a normal LFS checkout; a second workspace sends nothing", async () => {
      const d = driver("lfs");
      const before = localRepoFingerprint(repo.path);
      const first = await d.create(dirInput("lfs-1", repo.path), progress);
      expect(first.message).toBe("");
      expect(first.ok).toBe(true);
      const checkout = workspaceLayout(d.root, "lfs-1").checkout;
      expect(readFileSync(join(checkout, "model.bin")).equals(repo.model)).toBe(true);
      expect(readFileSync(join(checkout, "nested dir", "weights.bin")).equals(repo.weights)).toBe(true);
      expect(remoteGit(checkout, ["status", "--porcelain"])).toBe("");
      // "*": the content is there (a pointer would show "-").
      const listed = remoteGit(checkout, ["lfs", "ls-files"]).trim().split("\n");
      expect(listed.every((l) => /^[0-9a-f]{10} [*-] /.test(l))).toBe(true);
      expect(listed.map((l) => l.slice(11)).sort()).toEqual(["* model.bin", "* nested dir/weights.bin"]);
      // The repository's real endpoint, not the host's cache.
      expect(remoteGit(checkout, ["config", "remote.origin.lfsurl"]).trim()).toBe(`${DEAD_ORIGIN}.git/info/lfs`);
      expect(remoteGit(checkout, ["lfs", "env"])).toContain(`Endpoint=${DEAD_ORIGIN}.git/info/lfs`);
      expect(lfsMark(first.stderr, "lfs-sent")).toMatchObject({ bytes: 420_000, objects: 2 });
      expect(lfsMark(first.stderr, "lfs-pointers")).toBeUndefined();
      expect(localRepoFingerprint(repo.path)).toEqual(before);

      const second = await d.create(dirInput("lfs-2", repo.path), progress);
      expect(second.ok).toBe(true);
      expect(lfsMark(second.stderr, "lfs-sent")).toMatchObject({ bytes: 0, objects: 0 });
      const checkout2 = workspaceLayout(d.root, "lfs-2").checkout;
      expect(readFileSync(join(checkout2, "model.bin")).equals(repo.model)).toBe(true);
      expect(remoteGit(checkout2, ["status", "--porcelain"])).toBe("");
    });

    it("git-lfs hidden from the host's PATH: pointer files, a clean status, the progress and doctor say why", async () => {
      const d = driver("lfs-hidden");
      const onlyGit = mkdtempSync(join(tmpdir(), "paseo-only-git-"));
      chmodSync(onlyGit, 0o755);
      symlinkSync(GIT, join(onlyGit, "git"));
      try {
        setHostGitSearchPath(d.root, onlyGit);
        const r = await d.create(dirInput("lfs-h", repo.path), progress);
        expect(r.message).toBe("");
        expect(r.ok).toBe(true);
        const checkout = workspaceLayout(d.root, "lfs-h").checkout;
        expect(readFileSync(join(checkout, "model.bin"), "utf8")).toMatch(POINTER);
        expect(readFileSync(join(checkout, "nested dir", "weights.bin"), "utf8")).toMatch(POINTER);
        expect(readFileSync(join(checkout, "readme.txt"), "utf8")).toBe("plain\n");
        // The system config's required lfs filter must not break status where git-lfs is missing.
        expect(remoteGit(checkout, ["status", "--porcelain"], onlyGit)).toBe("");
        const mark = lfsMark(r.stderr, "lfs-pointers");
        expect(mark).toMatchObject({ files: 2, reason: "git-lfs is not installed on the remote host" });
        expect(String(mark?.paths)).toContain("nested dir/weights.bin");
        // Nothing was shipped for a host that cannot use it.
        expect(lfsMark(r.stderr, "lfs-sent")).toMatchObject({ bytes: 0 });

        const doctor = await runCli(["doctor", "--options", JSON.stringify(d.options)]);
        expect(doctor.code).toBe(0);
        expect(doctor.stdout.toString()).toMatch(
          /host facts .*git version [^;]+; git-lfs missing \(Git LFS files arrive as pointer files\);/,
        );
      } finally {
        rmSync(onlyGit, { recursive: true, force: true });
      }
    });

    it("an LFS filter that never answers and holds git's stderr: the checkout's timeout ends it all, names `checkout`, and a retry succeeds", async () => {
      const d = driver("lfs-hang");
      const dir = mkdtempSync(join(tmpdir(), "paseo-hanging-lfs-"));
      chmodSync(dir, 0o755);
      symlinkSync(GIT, join(dir, "git"));
      // `git lfs install --local` succeeds; the filter process leaves a child holding git's stderr
      // and never answers git's handshake, as the orphaned filter of issue 30 did.
      const marker = String(3600 + (process.pid % 300));
      writeFileSync(
        join(dir, "git-lfs"),
        `#!/bin/sh\nif [ "$1" = filter-process ]; then sleep ${marker} & exec sleep ${marker}; fi\nexit 0\n`,
        { mode: 0o755 },
      );
      const leftovers = () =>
        requireView()
          .processes()
          .filter((p) => p.argv[0]?.endsWith("sleep") && p.argv[1] === marker);
      try {
        setHostGit(d.root, { searchPath: `${dir}:/usr/bin:/bin`, checkoutTimeoutMs: 3_000 });
        const t0 = Date.now();
        // Bounded here so that a create that hangs (the bug) fails this test rather than the run.
        const r = await Promise.race([
          d.create(dirInput("lfs-hang", repo.path)),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the create hung for 60 s")), 60_000)),
        ]);
        expect(r.ok).toBe(false);
        expect(r.message).toContain("git checkout did not finish within 3000 ms");
        expect(Date.now() - t0).toBeLessThan(60_000);
        expect(leftovers()).toEqual([]);

        setHostGit(d.root, {});
        const again = await d.create(dirInput("lfs-hang", repo.path));
        expect(again.message).toBe("");
        expect(again.ok).toBe(true);
        expect(readFileSync(join(workspaceLayout(d.root, "lfs-hang").checkout, "model.bin")).equals(repo.model)).toBe(true);
      } finally {
        for (const p of leftovers()) process.kill(requireView().localPid(p.pid) ?? p.pid, "SIGKILL");
        rmSync(dir, { recursive: true, force: true });
      }
    }, 120_000);

    it("a pointer-shaped LFS file whose size is beyond 2^53 is an ordinary file: the create succeeds and keeps its bytes", async () => {
      const d = driver("lfs-huge");
      const clone = join(base, "huge-pointer");
      execFileSync("cp", ["-a", repo.path, clone]);
      // Committed as it is (no clean filter): the blob itself is the pointer-shaped text.
      const odd = `version https://git-lfs.github.com/spec/v1\noid sha256:${"b".repeat(64)}\nsize 9007199254740993\n`;
      writeFileSync(join(clone, "odd.bin"), odd);
      const blob = gitIn(clone, ["hash-object", "-w", "odd.bin"]).trim();
      gitIn(clone, ["update-index", "--add", "--cacheinfo", `100644,${blob},odd.bin`]);
      gitIn(clone, ["commit", "-q", "-m", "odd pointer"]);
      const r = await d.create(dirInput("lfs-huge", clone), progress);
      expect(r.message).toBe("");
      expect(r.ok).toBe(true);
      const checkout = workspaceLayout(d.root, "lfs-huge").checkout;
      expect(readFileSync(join(checkout, "odd.bin"), "utf8")).toBe(odd);
      expect(readFileSync(join(checkout, "model.bin")).equals(repo.model)).toBe(true);
      expect(lfsMark(r.stderr, "lfs-sent")).toMatchObject({ objects: 2 });
    });

    it("pointer-shaped files that name a real object with another size, or carry extra lines, never cost the real files their content", async () => {
      const d = driver("lfs-odd");
      const clone = join(base, "odd-pointers");
      execFileSync("cp", ["-a", repo.path, clone]);
      const oid = /oid sha256:([0-9a-f]{64})/.exec(gitIn(clone, ["cat-file", "-p", "HEAD:model.bin"]))![1]!;
      const head = `version https://git-lfs.github.com/spec/v1\noid sha256:${oid}\n`;
      // Sorted before model.bin, so they are the first the tree names with that oid.
      const odd: Record<string, string> = {
        "a-wrong-size.bin": `${head}size 5\n`,
        "b-extra-line.bin": `${head}size ${repo.model.length}\nnot a key\n`,
        "c-upper.bin": `version https://git-lfs.github.com/spec/v1\noid sha256:${oid.toUpperCase()}\nsize ${repo.model.length}\n`,
      };
      for (const [name, text] of Object.entries(odd)) {
        writeFileSync(join(clone, name), text);
        const blob = gitIn(clone, ["hash-object", "-w", name]).trim();
        gitIn(clone, ["update-index", "--add", "--cacheinfo", `100644,${blob},${name}`]);
      }
      gitIn(clone, ["commit", "-q", "-m", "odd pointers"]);
      const r = await d.create(dirInput("lfs-odd", clone), progress);
      expect(r.message).toBe("");
      expect(r.ok).toBe(true);
      const checkout = workspaceLayout(d.root, "lfs-odd").checkout;
      expect(readFileSync(join(checkout, "model.bin")).equals(repo.model)).toBe(true);
      expect(readFileSync(join(checkout, "nested dir", "weights.bin")).equals(repo.weights)).toBe(true);
      expect(lfsMark(r.stderr, "lfs-pointers")).toBeUndefined();
      for (const name of ["b-extra-line.bin", "c-upper.bin"]) expect(readFileSync(join(checkout, name), "utf8")).toBe(odd[name]);
    });

    it("an LFS object missing on the Paseo side stays a pointer, named in the progress; the create does not fail", async () => {
      const d = driver("lfs-missing");
      const clone = join(base, "partial");
      execFileSync("cp", ["-a", repo.path, clone]);
      const oid = /oid sha256:([0-9a-f]{64})/.exec(gitIn(clone, ["cat-file", "-p", "HEAD:nested dir/weights.bin"]))![1]!;
      unlinkSync(join(clone, ".git", "lfs", "objects", oid.slice(0, 2), oid.slice(2, 4), oid));
      const r = await d.create(dirInput("lfs-m", clone), progress);
      expect(r.message).toBe("");
      expect(r.ok).toBe(true);
      const checkout = workspaceLayout(d.root, "lfs-m").checkout;
      expect(readFileSync(join(checkout, "model.bin")).equals(repo.model)).toBe(true);
      expect(readFileSync(join(checkout, "nested dir", "weights.bin"), "utf8")).toMatch(POINTER);
      expect(remoteGit(checkout, ["status", "--porcelain"])).toBe("");
      const mark = lfsMark(r.stderr, "lfs-pointers");
      expect(mark).toMatchObject({ files: 1, paths: "nested dir/weights.bin" });
      // The host tried the repository's endpoint (nothing listens there).
      expect(String(mark?.reason)).toMatch(/^not in the Paseo side's LFS store and not fetched on the remote host \(.+\)$/);
      expect(lfsMark(r.stderr, "lfs-sent")).toMatchObject({ bytes: 300_000, objects: 1 });
    });

    it("an LFS object damaged on the Paseo side is refused by the host (sha256) and stays a pointer; nothing is left in the host's tmp", async () => {
      const d = driver("lfs-damaged");
      const clone = join(base, "damaged");
      execFileSync("cp", ["-a", repo.path, clone]);
      const oid = /oid sha256:([0-9a-f]{64})/.exec(gitIn(clone, ["cat-file", "-p", "HEAD:model.bin"]))![1]!;
      writeFileSync(join(clone, ".git", "lfs", "objects", oid.slice(0, 2), oid.slice(2, 4), oid), randomBytes(repo.model.length));
      const r = await d.create(dirInput("lfs-d", clone), progress);
      expect(r.message).toBe("");
      expect(r.ok).toBe(true);
      const checkout = workspaceLayout(d.root, "lfs-d").checkout;
      expect(readFileSync(join(checkout, "model.bin"), "utf8")).toMatch(POINTER);
      expect(readFileSync(join(checkout, "nested dir", "weights.bin")).equals(repo.weights)).toBe(true);
      expect(remoteGit(checkout, ["status", "--porcelain"])).toBe("");
      expect(lfsMark(r.stderr, "lfs-pointers")).toMatchObject({ files: 1, paths: "model.bin" });
      expect(readdirSync(join(d.root, "tmp")).filter((n) => n.startsWith("incoming-"))).toEqual([]);
    });

    it("an object of the host's store rewritten with other bytes of the same size is sent again, never checked out", async () => {
      const d = driver("lfs-rewritten");
      const first = await d.create(dirInput("lfs-r1", repo.path), progress);
      expect(first.message).toBe("");
      const oid = /oid sha256:([0-9a-f]{64})/.exec(gitIn(repo.path, ["cat-file", "-p", "HEAD:model.bin"]))![1]!;
      const stored = lfsObjectPath(cachePath(d.root, projectKey("fixture-project", repo.path)), oid);
      expect(readFileSync(stored).equals(repo.model)).toBe(true);
      // As a workload running as the host's user could: in place, same owner, same size.
      writeFileSync(stored, randomBytes(repo.model.length));
      const second = await d.create(dirInput("lfs-r2", repo.path), progress);
      expect(second.message).toBe("");
      expect(lfsMark(second.stderr, "lfs-sent")).toMatchObject({ bytes: 300_000, objects: 1 });
      expect(lfsMark(second.stderr, "lfs-pointers")).toBeUndefined();
      const checkout = workspaceLayout(d.root, "lfs-r2").checkout;
      expect(readFileSync(join(checkout, "model.bin")).equals(repo.model)).toBe(true);
      expect(remoteGit(checkout, ["status", "--porcelain"])).toBe("");
      expect(readFileSync(stored).equals(repo.model)).toBe(true);
      // The objects left alone are not sent again.
      const third = await d.create(dirInput("lfs-r3", repo.path), progress);
      expect(lfsMark(third.stderr, "lfs-sent")).toMatchObject({ bytes: 0, objects: 0 });
    });

    it("an object rewritten after the store's check and before `git lfs checkout` fails the create, is never checked out, and is sent again", async () => {
      const d = driver("lfs-late");
      expect((await d.create(dirInput("lfs-l1", repo.path), progress)).message).toBe("");
      const oid = /oid sha256:([0-9a-f]{64})/.exec(gitIn(repo.path, ["cat-file", "-p", "HEAD:model.bin"]))![1]!;
      const stored = lfsObjectPath(cachePath(d.root, projectKey("fixture-project", repo.path)), oid);
      const held = join(d.root, LFS_HELD_FILE);
      let late: Awaited<ReturnType<Driver["create"]>>;
      try {
        setHostGit(d.root, { lfsCheckoutHoldMs: 60_000 });
        const pending = d.create(dirInput("lfs-l2", repo.path), progress);
        for (let i = 0; i < 1500 && !existsSync(held); i++) await sleep(20);
        expect(existsSync(held)).toBe(true);
        // Its sha256 was checked (or its identity found unchanged) just before the hold.
        writeFileSync(stored, randomBytes(repo.model.length));
        setHostGit(d.root, {});
        late = await pending;
      } finally {
        setHostGit(d.root, {});
      }
      expect(late.ok).toBe(false);
      expect(late.message).toContain("changed between the check of its objects and their checkout");
      const again = await d.create(dirInput("lfs-l2", repo.path), progress);
      expect(again.message).toBe("");
      expect(lfsMark(again.stderr, "lfs-sent")).toMatchObject({ bytes: 300_000, objects: 1 });
      expect(readFileSync(join(workspaceLayout(d.root, "lfs-l2").checkout, "model.bin")).equals(repo.model)).toBe(true);
    });

    it("a submodule's LFS files come from the Paseo side's store; nothing reaches its .gitmodules URL, which accepts and never answers", async () => {
      const d = driver("lfs-submodule");
      const accepted: Socket[] = [];
      const silent = createServer((socket) => void accepted.push(socket));
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      try {
        const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/team/models.git`;
        const fx = lfsSubmoduleRepo(mkdtempSync(join(base, "submodule-")), url);
        const r = await d.create(dirInput("lfs-sub", fx.path), progress);
        expect(r.message).toBe("");
        expect(r.ok).toBe(true);
        const checkout = workspaceLayout(d.root, "lfs-sub").checkout;
        const sub = join(checkout, "libs", "models");
        expect(readFileSync(join(sub, "model.bin")).equals(fx.model)).toBe(true);
        expect(remoteGit(checkout, ["status", "--porcelain", "--ignore-submodules=none"])).toBe("");
        expect(remoteGit(sub, ["status", "--porcelain"])).toBe("");
        expect(remoteGit(sub, ["lfs", "ls-files"]).trim()).toMatch(/^[0-9a-f]{10} \* model\.bin$/);
        expect(remoteGit(sub, ["remote", "get-url", "origin"]).trim()).toBe(url);
        expect(lfsMark(r.stderr, "lfs-sent")).toMatchObject({ bytes: 200_000, objects: 1 });
        expect(lfsMark(r.stderr, "lfs-pointers")).toBeUndefined();
        expect(accepted.length).toBe(0);
      } finally {
        for (const s of accepted) s.destroy();
        silent.close();
      }
    });

    it("a git source with LFS files on a host whose git-lfs cannot reach a server: the create succeeds with pointer files", async () => {
      const d = driver("lfs-git");
      const bare = join(base, "lfs-source.git");
      gitIn(base, ["clone", "-q", "--bare", repo.path, bare]);
      execFileSync("chmod", ["-R", "a+rX", bare]);
      // Owned by the host's user, as a repository it fetches from would be (git's ownership check).
      execFileSync("chown", ["-R", `${rig().user}:`, bare]);
      const r = await d.create({
        workspaceId: "lfs-g",
        project: { projectId: "lfs-git", source: { kind: "git", url: `file://${bare}`, revision: "main" } },
        placement: { kind: "existing" },
      });
      expect(r.message).toBe("");
      expect(r.ok).toBe(true);
      const checkout = workspaceLayout(d.root, "lfs-g").checkout;
      expect(readFileSync(join(checkout, "model.bin"), "utf8")).toMatch(POINTER);
      expect(readFileSync(join(checkout, "readme.txt"), "utf8")).toBe("plain\n");
    });
  },
);
