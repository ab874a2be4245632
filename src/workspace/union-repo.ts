// Many local repositories read as one, so that a thousand submodules cost a handful of git processes
// instead of a few each (every git process costs milliseconds, tens of them on a busy machine): a
// throwaway bare repository in the temp directory whose object directory links to the submodules'
// object files, and whose shallow file is their boundaries together. Written by hand (no `git
// init`), read by git, removed afterwards; nothing is written in the local repositories.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
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
  /** What the linked objects take on disk (loose and packed): at least what any pack of them holds. */
  storedBytes: number;
  remove(): void;
}

/**
 * Links every object file of `objects` (loose objects and packs; not bitmaps, which describe one
 * pack alone) into `into`, and returns their size and the directories it borrows from (its alternates).
 */
function linkObjects(objects: string, into: string): { bytes: number; alternates: string[] } {
  let bytes = 0;
  const link = (from: string, to: string) => {
    try {
      symlinkSync(from, to);
      bytes += statSync(from).size;
    } catch (err) {
      // The same object (or pack) twice: a submodule that is two paths' submodule.
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  };
  for (const name of readdirSync(objects)) {
    if (/^[0-9a-f]{2}$/.test(name)) {
      const files = readdirSync(join(objects, name));
      if (files.length > 0) mkdirSync(join(into, name), { recursive: true });
      for (const f of files) link(join(objects, name, f), join(into, name, f));
    } else if (name === "pack") {
      for (const f of readdirSync(join(objects, "pack")).filter((n) => /^pack-[0-9a-f]+\.(pack|idx|rev)$/.test(n)))
        link(join(objects, "pack", f), join(into, "pack", f));
    }
  }
  let alternates: string[] = [];
  try {
    alternates = readFileSync(join(objects, "info", "alternates"), "utf8")
      .split("\n")
      .filter((l) => l && !l.startsWith("#"))
      .map((l) => resolve(objects, l));
  } catch {
    // none
  }
  return { bytes, alternates };
}

/**
 * A bare repository holding the objects of `objectDirs` (those that exist), cut at `shallow`. The
 * object files are linked into one object directory rather than listed as alternates: git looks an
 * object up in every alternate in turn, so 1,000 alternates made a pack of 1,000 submodules take
 * 22 s of CPU instead of well under one.
 */
export function unionRepo(objectDirs: string[], shallow: string[] = []): UnionRepo {
  const path = mkdtempSync(join(tmpdir(), "paseo-union-"));
  try {
    for (const d of ["refs/heads", "refs/tags", "objects/info", "objects/pack"]) mkdirSync(join(path, d), { recursive: true });
    writeFileSync(join(path, "HEAD"), "ref: refs/heads/main\n");
    writeFileSync(join(path, "config"), "[core]\n\trepositoryformatversion = 0\n\tbare = true\n");
    let storedBytes = 0;
    const borrowed = new Set<string>();
    for (const dir of new Set(objectDirs)) {
      if (!existsSync(dir)) continue;
      const linked = linkObjects(dir, join(path, "objects"));
      storedBytes += linked.bytes;
      linked.alternates.forEach((a) => borrowed.add(a));
    }
    // A path git would read as quoted (leading '"') or split (a line break) cannot be listed.
    const alternates = [...borrowed].filter((d) => !/^"|[\n\r]/.test(d) && existsSync(d));
    writeFileSync(join(path, "objects", "info", "alternates"), alternates.map((d) => `${d}\n`).join(""));
    const cut = [...new Set(shallow)];
    if (cut.length > 0) writeFileSync(join(path, "shallow"), cut.join("\n") + "\n");
    return { path, storedBytes, remove: () => rmSync(path, { recursive: true, force: true }) };
  } catch (err) {
    rmSync(path, { recursive: true, force: true });
    throw err;
  }
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
