// Submodule URLs are resolved as git resolves them: every case is checked against git itself
// (`git submodule init` in a scratch repository whose origin is the base), not against a table.
// Names and the agent's check of a request's submodule list refuse what would leave the checkout.
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { resolveSubmoduleUrl } from "../../src/workspace/submodule-url.js";
import { gitIn } from "../fixtures/repo.js";
import { isSafeSubmoduleName } from "../../src/shared/submodule-name.js";
import { parseSubmodules } from "../../src/remote-agent/workspace/submodule-checkout.js";

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
  const s = suite("all");
  let base: string;
  beforeAll(() => {
    base = s.tmp("paseo-suburl-");
  });

  /** A scratch repository with origin `origin` and one gitlink per URL (s0, s1, …) in .gitmodules. */
  const scratch = (origin: string, urls: string[]): string => {
    const repo = mkdtempSync(join(base, "r-"));
    gitIn(repo, ["init", "-q"]);
    gitIn(repo, ["remote", "add", "origin", origin]);
    urls.forEach((url, i) => {
      gitIn(repo, ["update-index", "--add", "--cacheinfo", `160000,${"1".repeat(40)},s${i}`]);
      gitIn(repo, ["config", "--file", ".gitmodules", `submodule.s${i}.path`, `s${i}`]);
      gitIn(repo, ["config", "--file", ".gitmodules", `submodule.s${i}.url`, url]);
    });
    return repo;
  };
  /** What `git submodule init` records for each URL under an origin of `origin`. */
  const byGit = (origin: string, urls: string[]): string[] => {
    const repo = scratch(origin, urls);
    gitIn(repo, ["submodule", "init", "-q"]);
    return urls.map((_, i) => gitIn(repo, ["config", `submodule.s${i}.url`]).trim());
  };

  it("matches git for absolute, scp-like, ssh, file and relative bases", () => {
    let compared = 0;
    for (const origin of BASES) {
      // git dies on a URL it cannot resolve: those are checked one by one, the rest in one init.
      const refused = URLS.filter((url) => {
        try {
          resolveSubmoduleUrl(origin, url);
          return false;
        } catch {
          return true;
        }
      });
      for (const url of refused) expect(() => byGit(origin, [url]), `${origin} + ${url}`).toThrow(/cannot strip one component/);
      const resolved = URLS.filter((url) => !refused.includes(url));
      const expected = byGit(origin, resolved);
      resolved.forEach((url, i) => expect(resolveSubmoduleUrl(origin, url), `${origin} + ${url}`).toBe(expected[i]));
      compared += URLS.length;
    }
    expect(compared).toBe(BASES.length * URLS.length);
  });
});

describe("submodule names and the agent's check of a request's submodule list", () => {
  const spec = (over: Record<string, unknown>) => ({
    key: "a".repeat(32),
    name: "libs/child",
    path: "libs/child",
    parent: -1,
    commit: "b".repeat(40),
    url: "https://example.com/child.git",
    shallow: [],
    ...over,
  });

  it("names that would leave .git/modules/ are refused", () => {
    for (const bad of ["", ".", "..", "a/../b", "a/./b", "/abs", "a//b", "a\\b", "a\nb", "trailing/"]) {
      expect(isSafeSubmoduleName(bad), JSON.stringify(bad)).toBe(false);
    }
    for (const good of ["child", "libs/child", "a b", "ünïcode", "-dash", ".hidden/x"]) expect(isSafeSubmoduleName(good), good).toBe(true);
  });

  it("paths outside the checkout, parents after children and option-like URLs are malformed", () => {
    expect(parseSubmodules([spec({})])).toEqual([spec({})]);
    for (const over of [
      { path: "../out" },
      { path: "/abs" },
      { name: "a/../../b" },
      { parent: 0 },
      { parent: -2 },
      { url: "--upload-pack=touch /tmp/x" },
      { commit: "HEAD" },
      { key: "../../etc" },
      { shallow: ["not-a-sha"] },
    ]) {
      expect(() => parseSubmodules([spec(over)]), JSON.stringify(over)).toThrow("malformed submodule list in agent request");
    }
  });
});
