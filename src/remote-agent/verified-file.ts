// The programs the agent writes next to itself (the workspace helper, the terminal relays) and
// later hands to node or python3 by path. Anything running as the login user, a workload of
// another workspace included, can rewrite them in between; so a file is run only once it is known
// to hold exactly our text: read and compared when first seen (or rewritten in place when it does
// not), then remembered by its stat identity, which any later write or replacement changes.
import { randomBytes } from "node:crypto";
import {
  closeSync,
  fstatSync,
  lstatSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  constants,
  type BigIntStats,
} from "node:fs";

const verified = new Map<string, string>();

/** What any write to, or replacement of, a file changes (a write sets ctime, which no one can set back). */
export function fileIdentity(st: BigIntStats): string {
  return `${st.dev}:${st.ino}:${st.mode}:${st.uid}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

export function lstatOrNull(path: string): BigIntStats | null {
  try {
    return lstatSync(path, { bigint: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

/** A regular file of ours that nobody else may write (the only kind whose text is worth reading). */
function plausible(st: BigIntStats): boolean {
  const me = BigInt(process.getuid?.() ?? 0);
  return st.isFile() && st.uid === me && (st.mode & 0o022n) === 0n;
}

/** The identity of `path` if it holds exactly `content` (read through one descriptor, no symlink followed). */
function matching(path: string, content: Buffer): string | null {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return null;
  }
  try {
    const st = fstatSync(fd, { bigint: true });
    if (!plausible(st) || st.size !== BigInt(content.length)) return null;
    return readFileSync(fd).equals(content) ? fileIdentity(st) : null;
  } finally {
    closeSync(fd);
  }
}

/**
 * `path`, once it holds exactly `content` (mode `mode`, ours, writable by nobody else): kept when
 * it already does, else replaced atomically. Costs one lstat while the remembered identity holds.
 */
export function verifiedFile(path: string, content: string, mode: number): string {
  const st = lstatOrNull(path);
  if (st && verified.get(path) === fileIdentity(st)) return path;
  verified.delete(path);
  const bytes = Buffer.from(content, "utf8");
  const id = st ? matching(path, bytes) : null;
  if (id) {
    verified.set(path, id);
    return path;
  }
  const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    writeFileSync(tmp, bytes, { mode, flag: "wx" });
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  const written = matching(path, bytes);
  if (!written) throw new Error(`${path} changed while it was being written`);
  verified.set(path, written);
  return path;
}
