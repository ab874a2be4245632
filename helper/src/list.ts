// fs-list (spec §6.3): one directory level, newest first; escaping or dangling symlinks are
// left out rather than failing the whole listing.
import { readdir } from "node:fs/promises";
import { posix } from "node:path";
import { modifiedAtOf, statBig } from "./file-info.js";
import { isMissingError, isOutsideError, resolveScoped } from "./scope.js";

interface ListEntry {
  name: string;
  path: string;
  kind: "file" | "directory";
  size: number;
  modifiedAt: string;
}

async function listEntry(root: string, dirRelative: string, name: string): Promise<ListEntry | undefined> {
  try {
    const scoped = await resolveScoped(root, posix.join(dirRelative, name));
    const stats = await statBig(scoped.absolute);
    return {
      name,
      path: scoped.relative,
      kind: stats.isDirectory() ? "directory" : "file",
      size: Number(stats.size),
      modifiedAt: modifiedAtOf(stats),
    };
  } catch (err) {
    if (isMissingError(err) || isOutsideError(err)) return undefined;
    throw err;
  }
}

export async function listDirectory(root: string, rawPath: string | undefined): Promise<object> {
  const scoped = await resolveScoped(root, rawPath);
  const stats = await statBig(scoped.absolute);
  if (!stats.isDirectory()) throw new Error("Requested path is not a directory");
  const entries: ListEntry[] = [];
  // Sequential on purpose: bounded file-descriptor and memory use on huge directories.
  for (const name of await readdir(scoped.absolute)) {
    const entry = await listEntry(root, scoped.relative, name);
    if (entry !== undefined) entries.push(entry);
  }
  entries.sort((a, b) => {
    const byTime = Date.parse(b.modifiedAt) - Date.parse(a.modifiedAt);
    return byTime !== 0 ? byTime : a.name.localeCompare(b.name);
  });
  return { path: scoped.relative, entries };
}
