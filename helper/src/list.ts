// fs-list (docs/contract.md#helper-commands): one directory level, newest first; escaping or dangling symlinks are
// left out rather than failing the whole listing.
import { readdir } from "node:fs/promises";
import { posix } from "node:path";
import { modifiedAtOf, statBig } from "./file-info.js";
import { isMissingError, isOutsideError, resolveScoped } from "./scope.js";

const STAT_CONCURRENCY = 32;

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
  const names = await readdir(scoped.absolute);
  const entries: ListEntry[] = [];
  // Bounded parallelism: fast on huge directories without unbounded pending operations.
  for (let i = 0; i < names.length; i += STAT_CONCURRENCY) {
    const batch = names.slice(i, i + STAT_CONCURRENCY).map((name) => listEntry(root, scoped.relative, name));
    for (const entry of await Promise.all(batch)) if (entry !== undefined) entries.push(entry);
  }
  // Same order as String.prototype.localeCompare (ECMA-402 defines it via this collator), faster.
  const byName = new Intl.Collator().compare;
  const millis = new Map(entries.map((entry) => [entry, Date.parse(entry.modifiedAt)]));
  entries.sort((a, b) => {
    const byTime = (millis.get(b) ?? 0) - (millis.get(a) ?? 0);
    return byTime !== 0 ? byTime : byName(a.name, b.name);
  });
  return { path: scoped.relative, entries };
}
