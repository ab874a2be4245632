// Which of our tag files a process holds on TAG_FD. A tag is recognised by identity (device and
// inode of the open file, what /proc/<pid>/fd/TAG_FD resolves to), never by a path prefix: a
// process that merely has some file of the workspace open on that descriptor is not ours. The
// one use of a path: once a workspace is destroyed its tag files are gone while processes that
// escaped may still hold them, and the kernel then names such a file `<path> (deleted)`; the exact
// path of one of our tag files (execs/<32 hex>.tag) identifies it then.
import { readdirSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/** Descriptor number that carries the tag in every workload process (high, so programs leave it alone). */
export const TAG_FD = 47;

const TAG_NAME = /^[0-9a-f]{32}\.tag$/;
const DELETED = " (deleted)";

export interface TagSet {
  /** `dev:ino` of each tag file that exists → its path. */
  byId: Map<string, string>;
  /** Whether a deleted file at `path` was one of these tags. */
  deletedTag(path: string): boolean;
}

const idOf = (st: { dev: number; ino: number }) => `${st.dev}:${st.ino}`;

/**
 * `path` as the kernel would show it: the real path of its longest existing prefix, plus the rest
 * (also where exec's cwd check judges a directory that does not exist).
 */
export function realSpelling(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    const parent = dirname(path);
    return parent === path ? path : join(realSpelling(parent), basename(path));
  }
}

function spellings(path: string): Set<string> {
  return new Set([path, realSpelling(path)]);
}

function addTag(byId: Map<string, string>, path: string): void {
  try {
    byId.set(idOf(statSync(path)), path);
  } catch {
    // not created yet, or gone with its workspace
  }
}

/** Every tag of a workspace (`<dir>/execs/*.tag`). */
export function workspaceTags(execsDir: string): TagSet {
  const byId = new Map<string, string>();
  let names: string[] = [];
  try {
    names = readdirSync(execsDir);
  } catch {
    // no exec yet, or the workspace is gone
  }
  for (const name of names) if (TAG_NAME.test(name)) addTag(byId, join(execsDir, name));
  const dirs = spellings(execsDir);
  return { byId, deletedTag: (path) => dirs.has(dirname(path)) && TAG_NAME.test(basename(path)) };
}

/** The tag of one exec. */
export function execTags(tagPath: string): TagSet {
  const byId = new Map<string, string>();
  addTag(byId, tagPath);
  const paths = spellings(tagPath);
  return { byId, deletedTag: (path) => paths.has(path) };
}

/** The path of the tag in `tags` that `pid` holds on TAG_FD, or null (Linux; null elsewhere). */
export function heldTag(pid: number, tags: TagSet): string | null {
  const fd = `/proc/${pid}/fd/${TAG_FD}`;
  let st;
  try {
    st = statSync(fd);
  } catch {
    return null; // no such descriptor, another user's process, or gone
  }
  const hit = tags.byId.get(idOf(st));
  if (hit !== undefined) return hit;
  if (st.nlink > 0) return null; // an existing file that is not one of our tags
  try {
    const link = readlinkSync(fd);
    if (!link.endsWith(DELETED)) return null;
    const path = link.slice(0, -DELETED.length);
    return tags.deletedTag(path) ? path : null;
  } catch {
    return null;
  }
}
