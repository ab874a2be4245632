// Submodule URLs are resolved as git resolves them: every case is checked against git itself
// (`git submodule init` in a scratch repository whose origin is the base), not against a table.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveSubmoduleUrl } from "../../src/workspace/submodule-url.js";
import { gitIn } from "../fixtures/repo.js";

const BASES = [
  "https://example.com/org/super.git",
  "https://example.com/org/super.git/",
  "git@github.com:org/super.git",
  "git@host:super.git",
  "ssh://git@host:2222/a/b/super",
  "file:///srv/git/super.git",
  "/srv/git/super.git",
  "../up/super",
  "plain",
];
const URLS = [
  "../child.git",
  "./child",
  "./././child",
  "../../x/y.git",
  "../../../z",
  ".././c/",
  "../c/",
  "https://other/abs.git",
  "../../../../../w",
];

describe("submodule URL resolution", () => {
  let repo: string;
  beforeAll(() => {
    repo = mkdtempSync(join(tmpdir(), "paseo-suburl-"));
    gitIn(repo, ["init", "-q"]);
    gitIn(repo, ["update-index", "--add", "--cacheinfo", `160000,${"1".repeat(40)},sub`]);
    gitIn(repo, ["config", "--file", ".gitmodules", "submodule.sub.path", "sub"]);
    gitIn(repo, ["remote", "add", "origin", "x"]);
  });
  afterAll(() => rmSync(repo, { recursive: true, force: true }));

  /** What `git submodule init` records for `url` under an origin of `base` (an Error when git refuses). */
  const byGit = (base: string, url: string): string | Error => {
    gitIn(repo, ["config", "remote.origin.url", base]);
    gitIn(repo, ["config", "--file", ".gitmodules", "submodule.sub.url", url]);
    try {
      gitIn(repo, ["config", "--unset", "submodule.sub.url"]);
    } catch {
      // not initialised yet
    }
    try {
      gitIn(repo, ["submodule", "init", "-q"]);
    } catch (err) {
      return err as Error;
    }
    return gitIn(repo, ["config", "submodule.sub.url"]).trim();
  };

  it("matches git for absolute, scp-like, ssh, file and relative bases", () => {
    let compared = 0;
    for (const base of BASES) {
      for (const url of URLS) {
        const expected = byGit(base, url);
        if (expected instanceof Error) {
          expect(() => resolveSubmoduleUrl(base, url), `${base} + ${url}`).toThrow(/cannot strip one component/);
        } else {
          expect(resolveSubmoduleUrl(base, url), `${base} + ${url}`).toBe(expected);
        }
        compared++;
      }
    }
    expect(compared).toBe(BASES.length * URLS.length);
  });
});
