// Pure logic: the lexical check that runs before anything is created remotely.
import { describe, expect, it } from "vitest";
import { normaliseRelativePath } from "../../src/shared/relative-path.js";

describe("normaliseRelativePath", () => {
  it.each([
    [undefined, ""],
    ["", ""],
    [".", ""],
    ["a/b", "a/b"],
    ["./a//b/", "a/b"],
    ["a/./b", "a/b"],
    ["..a/b..", "..a/b.."],
  ])("%j → %j", (input, out) => expect(normaliseRelativePath(input)).toBe(out));

  it.each(["..", "../x", "a/../b", "a/..", "/abs", "a\\b", "a\u0000b"])("%j escapes", (input) => {
    expect(() => normaliseRelativePath(input)).toThrow(/^Workspace cwd escapes its root$/);
  });
});
