// Many local repositories read as one, so that a thousand submodules cost a handful of git processes
// instead of a few each (every git process costs milliseconds, tens of them on a busy machine): a
// throwaway bare repository in the temp directory whose objects are the submodules' own object
// directories (alternates), and whose shallow file is their boundaries together. Written by hand
// (no `git init`), read by git, removed afterwards; nothing is written in the local repositories.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

/** A git dir's object directory (a linked worktree's git dir keeps it under its `commondir`). */
export function objectsDir(gitDir: string): string {
  try {
    const common = readFileSync(join(gitDir, "commondir"), "utf8").trim();
    if (common) return join(resolve(gitDir, common), "objects");
  } catch {
    // no commondir: its own
  }
  return join(gitDir, "objects");
}

export interface UnionRepo {
  path: string;
  remove(): void;
}

/** A bare repository reading the objects of `objectDirs` (those that exist), cut at `shallow`. */
export function unionRepo(objectDirs: string[], shallow: string[] = []): UnionRepo {
  const path = mkdtempSync(join(tmpdir(), "paseo-union-"));
  try {
    for (const d of ["refs/heads", "refs/tags", "objects/info", "objects/pack"]) mkdirSync(join(path, d), { recursive: true });
    writeFileSync(join(path, "HEAD"), "ref: refs/heads/main\n");
    writeFileSync(join(path, "config"), "[core]\n\trepositoryformatversion = 0\n\tbare = true\n");
    // A path git would read as quoted (leading '"') or split (a line break) cannot be listed; such a
    // directory is left out, so its submodule is found missing rather than misread.
    const dirs = [...new Set(objectDirs)].filter((d) => !/^"|[\n\r]/.test(d) && existsSync(d));
    writeFileSync(join(path, "objects", "info", "alternates"), dirs.map((d) => `${d}\n`).join(""));
    const cut = [...new Set(shallow)];
    if (cut.length > 0) writeFileSync(join(path, "shallow"), cut.join("\n") + "\n");
  } catch (err) {
    rmSync(path, { recursive: true, force: true });
    throw err;
  }
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** Runs `fn` with a union repository that is removed afterwards, whatever happens. */
export async function withUnionRepo<T>(objectDirs: string[], shallow: string[], fn: (repo: string) => Promise<T>): Promise<T> {
  const u = unionRepo(objectDirs, shallow);
  try {
    return await fn(u.path);
  } finally {
    u.remove();
  }
}
