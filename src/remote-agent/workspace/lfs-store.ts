// The per-project Git LFS store on the host (`<cache>/lfs/objects`, laid out as git-lfs lays out
// its own, so a checkout's `lfs.storage` points at it): asks the runtime for exactly the objects of
// the commit's pointers that the store lacks, and writes the stream it answers with into the store
// one object at a time. Each object is hashed as it arrives and renamed into place only when its
// sha256 and size match its pointer, so the store never holds a partial or wrong object; a second
// workspace of the same content asks for nothing.
// The store sits under the root, where anything running as the login user (a workload of another
// workspace) can rewrite an object, even with other bytes of the same size. So an object is used
// only once its content is known to be right: hashed when first seen by this process (a wrong one
// is removed, so it is sent again), then remembered by its stat identity, which any write changes.
import { closeSync, constants, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { open } from "node:fs/promises";
import { createHash, type Hash } from "node:crypto";
import { dirname, join } from "node:path";
import { Writable } from "node:stream";
import { RuntimeError } from "../../shared/errors.js";
import type { LfsPointer } from "../../shared/agent-api.js";
import { formatBytes, requireSpace } from "../../shared/disk-space.js";
import { rootLayout } from "../layout.js";
import { diskInfo, explainNoSpace } from "./disk.js";
import { INCOMING_PREFIX } from "./pack-intake.js";
import { TRANSFER_TIMEOUT_MS } from "./git-cache.js";
import type { Intake } from "./object-fill.js";
import { fileIdentity, lstatOrNull } from "../verified-file.js";

/** The store's directory (what `lfs.storage` names; git-lfs keeps `objects/` under it). */
export function lfsStoreDir(cache: string): string {
  return join(cache, "lfs");
}

export function lfsObjectPath(cache: string, oid: string): string {
  return join(lfsStoreDir(cache), "objects", oid.slice(0, 2), oid.slice(2, 4), oid);
}

type ObjectId = Pick<LfsPointer, "oid" | "size">;

/** Identity of each store object this process hashed (or wrote) and found right, by path. */
const verifiedObjects = new Map<string, string>();

/** The identity of the file at `path` if it holds exactly `p` (read through one descriptor, no symlink followed). */
async function hashedIdentity(path: string, p: ObjectId): Promise<string | null> {
  let file;
  try {
    file = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return null;
  }
  try {
    const before = await file.stat({ bigint: true });
    if (!before.isFile() || before.size !== BigInt(p.size)) return null;
    const hash = createHash("sha256");
    // Off the event loop's back: an object may be gigabytes, and the daemon serves others meanwhile.
    for await (const chunk of file.createReadStream({ autoClose: false, highWaterMark: 1024 * 1024 })) hash.update(chunk as Buffer);
    if (hash.digest("hex") !== p.oid) return null;
    const id = fileIdentity(await file.stat({ bigint: true }));
    return id === fileIdentity(before) ? id : null;
  } finally {
    await file.close();
  }
}

/** The identity `oid`'s object had when this process last found it intact (null: never). */
export function verifiedLfsIdentity(cache: string, oid: string): string | null {
  return verifiedObjects.get(lfsObjectPath(cache, oid)) ?? null;
}

/** The stat identity of the store's object for `oid` now (null: none there), to see whether it changed. */
export function lfsObjectIdentity(cache: string, oid: string): string | null {
  const st = lstatOrNull(lfsObjectPath(cache, oid));
  return st ? fileIdentity(st) : null;
}

/**
 * Whether the store holds `p` intact: its sha256 is checked unless this process already did so
 * for the file as it is now. One that is not intact (another size, other bytes, not a regular
 * file) is removed, so it is asked for again or fetched, never checked out.
 */
export async function hasVerifiedLfsObject(cache: string, p: ObjectId): Promise<boolean> {
  const path = lfsObjectPath(cache, p.oid);
  const now = lfsObjectIdentity(cache, p.oid);
  if (now === null) return false;
  if (verifiedObjects.get(path) === now) return true;
  verifiedObjects.delete(path);
  const id = await hashedIdentity(path, p);
  if (id !== null) {
    verifiedObjects.set(path, id);
    return true;
  }
  rmSync(path, { recursive: true, force: true });
  return false;
}

/** One pointer per object (a tree may hold the same content at several paths). */
export function uniqueObjects<T extends ObjectId>(pointers: T[]): T[] {
  const seen = new Set<string>();
  return pointers.filter((p) => !seen.has(p.oid) && seen.add(p.oid));
}

/** Splits the byte stream into the objects asked for, writing each into the quarantine then the store. */
class ObjectSink extends Writable {
  private index = 0;
  private written = 0;
  private fd: number | null = null;
  private hash: Hash | null = null;

  constructor(
    private readonly wanted: LfsPointer[],
    private readonly quarantine: string,
    private readonly cache: string,
  ) {
    super({ highWaterMark: 1024 * 1024 });
    this.skipEmpty();
  }

  /** Objects of 0 bytes take nothing from the stream. */
  private skipEmpty(): void {
    while (this.index < this.wanted.length && this.wanted[this.index]!.size === 0) this.finishObject();
  }

  private finishObject(): void {
    const p = this.wanted[this.index]!;
    const tmp = join(this.quarantine, p.oid);
    if (this.fd === null) this.open(p);
    closeSync(this.fd!);
    this.fd = null;
    const digest = this.hash!.digest("hex");
    this.hash = null;
    if (digest === p.oid) {
      const to = lfsObjectPath(this.cache, p.oid);
      mkdirSync(dirname(to), { recursive: true, mode: 0o700 });
      renameSync(tmp, to);
      // Hashed on its way in: the next use needs no second read.
      const id = lfsObjectIdentity(this.cache, p.oid);
      if (id !== null) verifiedObjects.set(to, id);
    } else {
      rmSync(tmp, { force: true });
    }
    this.index++;
    this.written = 0;
  }

  private open(p: LfsPointer): void {
    this.fd = openSync(join(this.quarantine, p.oid), "w", 0o600);
    this.hash = createHash("sha256");
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    try {
      let at = 0;
      while (at < chunk.length) {
        const p = this.wanted[this.index];
        if (!p) throw new RuntimeError("remote", "the runtime sent more LFS data than was asked for");
        if (this.fd === null) this.open(p);
        const part = chunk.subarray(at, at + (p.size - this.written));
        writeSync(this.fd!, part);
        this.hash!.update(part);
        this.written += part.length;
        at += part.length;
        if (this.written === p.size) {
          this.finishObject();
          this.skipEmpty();
        }
      }
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  /** Whether every object asked for arrived (some may have been wrong). */
  complete(): boolean {
    return this.index === this.wanted.length;
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    done(err);
  }
}

/**
 * Brings the objects of `pointers` (the superproject's and its submodules') that the runtime holds
 * and this store lacks (none when `wanted` is false: this host has no git-lfs to use them). An
 * object that arrives damaged is dropped (its file stays a pointer unless the host fetches it).
 */
export async function fillLfsStore({ ctx, inbox }: Intake, cache: string, pointers: LfsPointer[], wanted: boolean): Promise<void> {
  const lacking: LfsPointer[] = [];
  if (wanted) {
    for (const p of uniqueObjects(pointers)) if (p.local && !(await hasVerifiedLfsObject(cache, p))) lacking.push(p);
  }
  ctx.sendJson({ type: "need-lfs", oids: lacking.map((p) => p.oid) });
  const tmpBase = rootLayout(ctx.root).tmpBase;
  mkdirSync(tmpBase, { recursive: true, mode: 0o700 });
  const bytes = lacking.reduce((n, p) => n + p.size, 0);
  try {
    requireSpace(diskInfo(ctx.root), { bytes, files: lacking.length }, `the LFS objects (${formatBytes(bytes)})`);
    // Under `<root>/tmp` with the pack quarantine's prefix: reconcile removes one left behind.
    const quarantine = mkdtempSync(join(tmpBase, `${INCOMING_PREFIX}lfs-`));
    const sink = new ObjectSink(lacking, quarantine, cache);
    try {
      const failed = new Promise<void>((_resolve, reject) => sink.once("error", reject));
      failed.catch(() => undefined);
      await inbox.pipeStdinTo(sink, failed, TRANSFER_TIMEOUT_MS);
      await new Promise<void>((resolve, reject) => sink.end((err?: Error | null) => (err ? reject(err) : resolve())));
      if (!sink.complete()) throw new RuntimeError("remote", "the LFS object stream ended early");
    } finally {
      sink.destroy();
      rmSync(quarantine, { recursive: true, force: true });
    }
  } catch (err) {
    throw explainNoSpace(err, ctx.root, "while receiving LFS objects");
  }
}
