// Which LFS endpoint a workspace's checkout is given, from the local repository's config, and how
// progress names pointer files, what counts as a pointer (pure logic: the end-to-end behaviour is
// in lfs.test.ts).
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { lfsEndpointFrom, lfsPlan, namePaths, parsePointer } from "../../src/workspace/lfs-objects.js";
import { suite } from "../support/suite.js";
import { LfsSpec } from "../../src/shared/agent-api.js";

const OID = "a".repeat(64);
const pointer = (size: string) => `version https://git-lfs.github.com/spec/v1\noid sha256:${OID}\nsize ${size}\n`;

describe("what is an LFS pointer", () => {
  it("is exactly what the agent's schema takes: a size beyond 2^53 makes an ordinary file", () => {
    expect(parsePointer(pointer("120000"))).toEqual({ oid: OID, size: 120_000 });
    expect(parsePointer(pointer(String(Number.MAX_SAFE_INTEGER)))).toEqual({ oid: OID, size: Number.MAX_SAFE_INTEGER });
    for (const size of ["9007199254740993", "99999999999999999999", String(2n ** 63n)]) expect(parsePointer(pointer(size))).toBeNull();
    expect(parsePointer("plain text\n")).toBeNull();
    // Whatever parsePointer accepts, the agent's request schema accepts.
    const accepted = parsePointer(pointer(String(Number.MAX_SAFE_INTEGER)))!;
    expect(LfsSpec({ pointers: [{ path: "x", ...accepted, local: false }], endpoint: null })).toBe(true);
  });
});

const none = { lfsUrl: "", remoteLfsUrl: "", originUrl: "" };

describe("the pointers of a tree (a real local repository)", () => {
  const s = suite();

  it("are found among 3,000 other small files, the shortest possible pointer and odd paths included, and nothing else", async () => {
    const repo = s.tmp("paseo-lfs-tree-");
    execFileSync("git", ["init", "-q", "-b", "main", repo]);
    mkdirSync(join(repo, "d"));
    // Files of every size around the pointers' (one byte short of the shortest, up to 1,024).
    for (let i = 0; i < 3000; i++) writeFileSync(join(repo, "d", `f${i}.txt`), "x".repeat(i % 1100));
    const oid = (n: number) => n.toString(16).padStart(64, "0");
    const ptr = (n: number, size: number) => `version https://git-lfs.github.com/spec/v1\noid sha256:${oid(n)}\nsize ${size}\n`;
    const pointers = [
      { path: "a.bin", oid: oid(1), size: 10 },
      { path: "d/shortest.bin", oid: oid(2), size: 0 },
      { path: "名前/ファイル.bin", oid: oid(3), size: 123_456 },
      { path: "d/new\nline.bin", oid: oid(4), size: 7 },
    ];
    mkdirSync(join(repo, "名前"));
    for (const p of pointers) writeFileSync(join(repo, p.path), ptr(Number.parseInt(p.oid, 16), p.size));
    expect(ptr(2, 0)).toHaveLength(126);
    const commit = (paths: string[]) => {
      execFileSync("git", ["add", ...paths], { cwd: repo });
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "t"], { cwd: repo });
    };
    // The files first, the attributes after: git-lfs need not be installed here (a host's
    // /etc/gitconfig may require its filter while the program is missing).
    commit(["-A"]);
    writeFileSync(join(repo, ".gitattributes"), "*.bin filter=lfs diff=lfs merge=lfs -text\n");
    commit([".gitattributes"]);
    const head = execFileSync("git", ["rev-parse", "HEAD"], { cwd: repo, encoding: "utf8" }).trim();
    const plan = await lfsPlan(repo, head);
    const got = plan!.spec.pointers.map((p) => ({ path: p.path, oid: p.oid, size: p.size }));
    expect(got.sort((a, b) => a.path.localeCompare(b.path))).toEqual([...pointers].sort((a, b) => a.path.localeCompare(b.path)));
  });
});

describe("the LFS endpoint given to the host", () => {
  it("derives it from an https origin as git-lfs does, without credentials", () => {
    expect(lfsEndpointFrom({ ...none, originUrl: "https://git.example.com/team/repo" })).toEqual({
      key: "remote.origin.lfsurl",
      url: "https://git.example.com/team/repo.git/info/lfs",
    });
    expect(lfsEndpointFrom({ ...none, originUrl: "https://user:s3cret@git.example.com/team/repo.git/" })).toEqual({
      key: "remote.origin.lfsurl",
      url: "https://git.example.com/team/repo.git/info/lfs",
    });
  });

  it("keeps SSH and scp-like origins as they are (git-lfs authenticates over SSH)", () => {
    for (const url of ["git@git.example.com:team/repo.git", "ssh://git@git.example.com/team/repo.git"])
      expect(lfsEndpointFrom({ ...none, originUrl: url })).toEqual({ key: "remote.origin.lfsurl", url });
  });

  it("prefers lfs.url, then remote.origin.lfsurl, and drops their credentials too", () => {
    const all = {
      lfsUrl: "https://t0ken@lfs.example.com/x",
      remoteLfsUrl: "https://lfs2.example.com/y",
      originUrl: "https://git.example.com/z",
    };
    expect(lfsEndpointFrom(all)).toEqual({ key: "lfs.url", url: "https://lfs.example.com/x" });
    expect(lfsEndpointFrom({ ...all, lfsUrl: "" })).toEqual({ key: "remote.origin.lfsurl", url: "https://lfs2.example.com/y" });
  });

  it("gives none for a local path or file URL, or no origin", () => {
    expect(lfsEndpointFrom(none)).toBeNull();
    expect(lfsEndpointFrom({ ...none, originUrl: "/srv/git/repo.git" })).toBeNull();
    expect(lfsEndpointFrom({ ...none, originUrl: "file:///srv/git/repo.git" })).toBeNull();
    expect(lfsEndpointFrom({ ...none, originUrl: "../sibling" })).toBeNull();
  });

  it("a progress line names at most 20 pointer files, then how many more", () => {
    const paths = Array.from({ length: 23 }, (_, i) => `f${i}.bin`);
    expect(namePaths(paths.slice(0, 2))).toBe("f0.bin, f1.bin");
    expect(namePaths(paths)).toBe(`${paths.slice(0, 20).join(", ")}, … (3 more)`);
  });
});
