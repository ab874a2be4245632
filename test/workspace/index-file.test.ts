// index-file.ts (pure logic against real git): an index git wrote, read and written back by us,
// is the same index to git (entries, stat data: `git diff-files` re-hashes nothing and finds
// nothing changed); a part of it with shortened paths is a valid index of the subdirectory.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { readIndex, writeIndex } from "../../src/remote-agent/workspace/index-file.js";
import { gitIn } from "../fixtures/repo.js";

describe("index-file", () => {
  const base = suite("all").tmp("paseo-index-");

  const repo = (name: string) => {
    const dir = join(base, name);
    mkdirSync(join(dir, "sub", "deep"), { recursive: true });
    writeFileSync(join(dir, "a.txt"), "a\n");
    writeFileSync(join(dir, "sub", "b.txt"), "b\n");
    writeFileSync(join(dir, "sub", "deep", `${"long-name-".repeat(20)}.txt`), "c\n");
    gitIn(dir, ["init", "-q", "-b", "main"]);
    gitIn(dir, ["-c", "index.version=2", "add", "-A"]);
    return dir;
  };

  it("writes back what it read: git lists the same entries and sees no file changed", () => {
    const dir = repo("same");
    const before = gitIn(dir, ["ls-files", "--stage", "--debug"]);
    const entries = readIndex(readFileSync(join(dir, ".git", "index")));
    expect(entries.map((e) => e.path.toString())).toEqual(["a.txt", "sub/b.txt", `sub/deep/${"long-name-".repeat(20)}.txt`]);
    writeIndex(join(dir, ".git", "index"), entries);
    expect(gitIn(dir, ["ls-files", "--stage", "--debug"])).toBe(before);
    expect(gitIn(dir, ["diff-files", "--name-only"])).toBe("");
  });

  it("a subdirectory's part, paths shortened, is a valid index of that directory as a repository", () => {
    const dir = repo("part");
    const entries = readIndex(readFileSync(join(dir, ".git", "index")))
      .filter((e) => e.path.toString().startsWith("sub/"))
      .map((e) => ({ fixed: e.fixed, path: e.path.subarray(4) }));
    const sub = join(dir, "sub");
    gitIn(sub, ["init", "-q", "-b", "main"]);
    writeIndex(join(sub, ".git", "index"), entries);
    expect(gitIn(sub, ["ls-files"]).split("\n").filter(Boolean)).toEqual(["b.txt", `deep/${"long-name-".repeat(20)}.txt`]);
    expect(gitIn(sub, ["diff-files", "--name-only"])).toBe("");
  });

  it("refuses an index it does not know (version 4) rather than guess", () => {
    const dir = repo("v4");
    gitIn(dir, ["update-index", "--index-version", "4"]);
    expect(() => readIndex(readFileSync(join(dir, ".git", "index")))).toThrow(/index version 4/);
  });
});
