// One file per name in src (issue 31): a name found twice (three `reconcile.ts`, two `probe.ts`)
// says too little of what each holds and makes a stack trace or a doc reference ambiguous.
// helper/src is its own bundle and is left out.
import { readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

describe("file names in src", () => {
  it("name each module once", () => {
    const byName = new Map<string, string[]>();
    for (const file of sourceFiles(SRC)) {
      const name = file.slice(file.lastIndexOf("/") + 1);
      byName.set(name, [...(byName.get(name) ?? []), relative(SRC, file)]);
    }
    expect(byName.size).toBeGreaterThan(100);
    expect([...byName.values()].filter((paths) => paths.length > 1)).toEqual([]);
  });
});
