// Source resolution on the Paseo host refuses unusable directories with one clear line each,
// before anything connects to a host.
import { execFileSync } from "node:child_process";
import { chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { resolveLocalSource } from "../../src/workspace/local-source.js";
import { RuntimeError } from "../../src/shared/errors.js";
import { gitResult } from "../../src/shared/git-exec.js";
import { unless } from "../support/needs.js";

describe("directory source resolution", () => {
  const base = suite("all").tmp("paseo-local-source-");

  async function failure(path: string): Promise<RuntimeError> {
    const err = await resolveLocalSource(path, { kind: "existing" }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RuntimeError);
    return err as RuntimeError;
  }

  it("a missing directory", async () => {
    const err = await failure(join(base, "nope"));
    expect(err.errorClass).toBe("input");
    expect(err.message).toBe(`Project directory does not exist: ${join(base, "nope")}`);
  });

  it("a directory that is not a git repository", async () => {
    const dir = mkdtempSync(join(base, "plain-"));
    const err = await failure(dir);
    expect(err.errorClass).toBe("input");
    expect(err.message).toBe(`Project directory is not a git repository: ${dir}`);
  });

  it("the git runner says 'not a repository' by its code, not by text", async () => {
    const dir = mkdtempSync(join(base, "plain-"));
    const err = await gitResult(["rev-parse", "--show-toplevel"], { cwd: dir }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RuntimeError);
    expect((err as RuntimeError).code).toBe("git-not-a-repository");
  });

  // Before the code, the runner's message was matched: a path that spells the words turned git's
  // own reason (here its refusal of a repository another user owns) into the wrong one.
  it(
    "a repository whose path says 'not a git repository' keeps git's own reason",
    unless(process.getuid?.() === 0 ? null : "needs root: the repository is chowned to another user"),
    async () => {
      const dir = join(mkdtempSync(join(base, "named-")), "not a git repository");
      execFileSync("git", ["init", "-q", dir]);
      chownSync(dir, 65534, 65534);
      const err = await failure(dir);
      expect(err.message).not.toBe(`Project directory is not a git repository: ${dir}`);
      expect(err.message).toMatch(/dubious ownership/);
    },
  );

  it("a repository without a commit", async () => {
    const dir = mkdtempSync(join(base, "unborn-"));
    execFileSync("git", ["init", "-q", dir]);
    const err = await failure(dir);
    expect(err.message).toBe(`The project repository has no commit to materialize: ${dir}`);
  });
});
