// Source resolution on the Paseo host refuses unusable directories with one clear line each,
// before anything connects to a host.
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { resolveLocalSource } from "../../src/workspace/local-source.js";
import { RuntimeError } from "../../src/shared/errors.js";

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

  it("a repository without a commit", async () => {
    const dir = mkdtempSync(join(base, "unborn-"));
    execFileSync("git", ["init", "-q", dir]);
    const err = await failure(dir);
    expect(err.message).toBe(`The project repository has no commit to materialize: ${dir}`);
  });
});
