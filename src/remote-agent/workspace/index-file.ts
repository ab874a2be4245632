// Git's index file (format version 2), read and written without git: one checkout of many
// submodules' trees side by side (submodule-batch.ts) leaves one index, and each submodule gets its
// own part of it, paths shortened, stat data kept (the files are renamed, not rewritten, so git
// sees them unchanged and `git status` needs no re-hash). Only what git writes for a fresh
// checkout with `index.version=2` is accepted; anything else is refused, never guessed at.
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { RuntimeError } from "../../shared/errors.js";

/** Fixed part of an entry: ctime, mtime, dev, ino, mode, uid, gid, size (4 bytes each but times: 8), object id (20), flags (2). */
const FIXED = 62;
const SHA1_BYTES = 20;

export interface IndexEntry {
  /** The entry's bytes before its name (stat data, mode, object id, flags). */
  fixed: Buffer;
  path: Buffer;
}

export const entryMode = (e: IndexEntry): number => e.fixed.readUInt32BE(24);

function malformed(why: string): RuntimeError {
  return new RuntimeError("remote", `Cannot read the submodules' checkout index: ${why}`);
}

/** The entries of a version-2 index, in its order. */
export function readIndex(buf: Buffer): IndexEntry[] {
  if (buf.length < 12 + SHA1_BYTES || buf.toString("latin1", 0, 4) !== "DIRC") throw malformed("not an index file");
  const version = buf.readUInt32BE(4);
  if (version !== 2) throw malformed(`index version ${version}`);
  const count = buf.readUInt32BE(8);
  const entries: IndexEntry[] = [];
  let at = 12;
  for (let i = 0; i < count; i++) {
    if (at + FIXED > buf.length - SHA1_BYTES) throw malformed("truncated");
    const flags = buf.readUInt16BE(at + 60);
    if (flags & 0x4000) throw malformed("extended flags");
    const end = buf.indexOf(0, at + FIXED);
    if (end < 0) throw malformed("unterminated path");
    entries.push({ fixed: buf.subarray(at, at + FIXED), path: buf.subarray(at + FIXED, end) });
    // Padded with 1-8 NULs to a multiple of 8 bytes.
    at += (FIXED + (end - at - FIXED) + 8) & ~7;
  }
  return entries;
}

/** Writes `entries` (already in git's order) as a version-2 index with its checksum. */
export function writeIndex(file: string, entries: IndexEntry[]): void {
  const parts: Buffer[] = [];
  const header = Buffer.alloc(12);
  header.write("DIRC", 0, "latin1");
  header.writeUInt32BE(2, 4);
  header.writeUInt32BE(entries.length, 8);
  parts.push(header);
  for (const e of entries) {
    const size = (FIXED + e.path.length + 8) & ~7;
    const out = Buffer.alloc(size);
    e.fixed.copy(out, 0, 0, FIXED);
    const flags = (e.fixed.readUInt16BE(60) & 0xf000) | Math.min(e.path.length, 0xfff);
    out.writeUInt16BE(flags, 60);
    e.path.copy(out, FIXED);
    parts.push(out);
  }
  const body = Buffer.concat(parts);
  writeFileSync(file, Buffer.concat([body, createHash("sha1").update(body).digest()]), { mode: 0o644 });
}
