// Entry mutations (docs/contract.md#helper-commands): create, rename, duplicate and delete workspace entries. Every
// outcome is a JSON result with exit 0; only argument errors are hard failures.
import { cp, lstat, mkdir, open, rename, rm, stat } from "node:fs/promises";
import { posix, resolve } from "node:path";
import { errorMessage } from "./output.js";
import { isMissingError, resolveScoped, type Scoped } from "./scope.js";

export type EntryResult = { status: "ok"; path: string } | { status: "error"; error: string };

function validName(raw: string | undefined): string {
  const name = (raw ?? "").trim();
  if (name === "" || name === "." || name === "..") throw new Error("Invalid name");
  if (name.includes("/") || name.includes("\\")) throw new Error("Name cannot contain path separators");
  return name;
}

function existsCode(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  // fs.cp reports an existing target with its own code.
  return code === "EEXIST" || code === "ERR_FS_CP_EEXIST";
}

async function answer(name: string | undefined, action: () => Promise<string>): Promise<EntryResult> {
  try {
    return { status: "ok", path: await action() };
  } catch (err) {
    if (existsCode(err)) return { status: "error", error: `"${name ?? "Entry"}" already exists` };
    if (isMissingError(err)) return { status: "error", error: "File or folder no longer exists" };
    return { status: "error", error: errorMessage(err) };
  }
}

// Entries are renamed, copied and removed at their lexical location, so a symlink is handled
// as the link itself, not as its target.
function lexical(root: string, scoped: Scoped): string {
  return resolve(root, scoped.relative);
}

async function lstatOrUndefined(path: string) {
  try {
    return await lstat(path);
  } catch (err) {
    if (isMissingError(err)) return undefined;
    throw err;
  }
}

async function sourceEntry(root: string, rawPath: string | undefined, rootRefusal: string): Promise<Scoped> {
  const source = await resolveScoped(root, rawPath);
  if (source.relative === ".") throw new Error(rootRefusal);
  return source;
}

export function createEntry(
  root: string,
  parentPath: string | undefined,
  rawName: string | undefined,
  kind: string | undefined,
): Promise<EntryResult> {
  return answer(rawName?.trim(), async () => {
    const name = validName(rawName);
    if (kind !== "file" && kind !== "directory") throw new Error("Invalid entry kind");
    const parent = await resolveScoped(root, parentPath);
    if (!(await stat(parent.absolute)).isDirectory()) throw new Error("Parent path is not a directory");
    const target = await resolveScoped(root, posix.join(parent.relative, name));
    if (kind === "directory") {
      await mkdir(target.absolute);
    } else {
      await (await open(target.absolute, "wx", 0o644)).close();
    }
    return target.relative;
  });
}

export function renameEntry(root: string, rawPath: string | undefined, rawName: string | undefined): Promise<EntryResult> {
  return answer(rawName?.trim(), async () => {
    const name = validName(rawName);
    const source = await sourceEntry(root, rawPath, "Cannot rename the workspace root");
    const target = await resolveScoped(root, posix.join(posix.dirname(source.relative), name));
    const sourceStats = await lstat(lexical(root, source));
    const targetStats = await lstatOrUndefined(lexical(root, target));
    // Same inode (e.g. a case-only rename on a case-insensitive filesystem) is not a clash.
    if (targetStats !== undefined && (targetStats.dev !== sourceStats.dev || targetStats.ino !== sourceStats.ino)) {
      throw new Error(`"${name}" already exists`);
    }
    if (source.relative !== target.relative) await rename(lexical(root, source), lexical(root, target));
    return target.relative;
  });
}

export function duplicateEntry(root: string, rawPath: string | undefined): Promise<EntryResult> {
  return answer(undefined, async () => {
    const source = await sourceEntry(root, rawPath, "Cannot duplicate the workspace root");
    const sourceStats = await lstat(lexical(root, source));
    const name = posix.basename(source.relative);
    const extension = sourceStats.isDirectory() ? "" : posix.extname(name);
    const base = name.slice(0, name.length - extension.length);
    const directory = posix.dirname(source.relative);
    for (let n = 1; ; n += 1) {
      const candidate = `${base} copy${n === 1 ? "" : ` ${n}`}${extension}`;
      const target = await resolveScoped(root, posix.join(directory, candidate));
      if ((await lstatOrUndefined(lexical(root, target))) !== undefined) continue;
      await cp(lexical(root, source), lexical(root, target), {
        recursive: true,
        errorOnExist: true,
        force: false,
        preserveTimestamps: true,
        // Relative links inside a copied tree keep pointing into the copy.
        verbatimSymlinks: true,
      });
      return target.relative;
    }
  });
}

export function deleteEntry(root: string, rawPath: string | undefined): Promise<EntryResult> {
  return answer(undefined, async () => {
    const source = await sourceEntry(root, rawPath, "Cannot delete the workspace root");
    const path = lexical(root, source);
    const stats = await lstat(path);
    await rm(path, { recursive: stats.isDirectory(), force: false });
    return source.relative;
  });
}
