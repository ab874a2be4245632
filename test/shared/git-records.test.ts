// gitRecords hands over each NUL-terminated record of a git listing as it streams: paths with
// multi-byte characters come whole wherever the pipe's chunks happen to end (pure logic over a
// real local git; the checkout check on the host reads the index through it).
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { gitRecords } from "../../src/shared/git-exec.js";
import { suite } from "../support/suite.js";

const s = suite();

describe("gitRecords", () => {
  it("a listing of 4,000 multi-byte names (over 300 KB, many pipe chunks) arrives whole, name for name", async () => {
    const repo = s.tmp("paseo-git-records-");
    execFileSync("git", ["init", "-q", repo]);
    // Three-byte characters and an odd-length prefix, so chunk ends fall inside characters.
    const names = Array.from({ length: 4000 }, (_, i) => `ファイル-${i}-${"語".repeat(20)}.txt`);
    for (const n of names) writeFileSync(join(repo, n), "");
    execFileSync("git", ["-c", "core.quotepath=off", "add", "."], { cwd: repo });
    const seen: string[] = [];
    let bytes = 0;
    await gitRecords(["ls-files", "-z"], { cwd: repo }, (r) => {
      bytes += Buffer.byteLength(r) + 1;
      seen.push(r);
    });
    expect(bytes).toBeGreaterThan(300_000);
    expect(seen.filter((r) => r.includes("\uFFFD"))).toEqual([]);
    expect(seen.sort()).toEqual([...names].sort());
  });
});
