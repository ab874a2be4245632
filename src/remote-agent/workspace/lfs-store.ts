// The per-project Git LFS store on the host (`<cache>/lfs/objects`, laid out as git-lfs lays out
// its own, so a checkout's `lfs.storage` points at it): asks the runtime for exactly the objects of
// the commit's pointers that the store lacks, and writes the stream it answers with into the store
// one object at a time. Each object is hashed as it arrives and renamed into place only when its
// sha256 and size match its pointer, so the store never holds a partial or wrong object; a second
// workspace of the same content asks for nothing.
import { closeSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { createHash, type Hash } from "node:crypto";
import { dirname, join } from "node:path";
import { Writable } from "node:stream";
import { RuntimeError } from "../../shared/errors.js";
import type { LfsPointer, LfsSpec } from "../../shared/agent-api.js";
import { formatBytes, requireSpace } from "../../shared/disk-space.js";
import { rootLayout } from "../layout.js";
import { diskInfo, explainNoSpace } from "./disk.js";
import { INCOMING_PREFIX } from "./pack-intake.js";
import { TRANSFER_TIMEOUT_MS } from "./git-cache.js";
import type { Intake } from "./object-fill.js";

/** The store's directory (what `lfs.storage` names; git-lfs keeps `objects/` under it). */
export function lfsStoreDir(cache: string): string {
  return join(cache, "lfs");
}

export function lfsObjectPath(cache: string, oid: string): string {
  return join(lfsStoreDir(cache), "objects", oid.slice(0, 2), oid.slice(2, 4), oid);
}

export function hasLfsObject(cache: string, p: { oid: string; size: number }): boolean {
  try {
    const st = statSync(lfsObjectPath(cache, p.oid));
    return st.isFile() && st.size === p.size;
  } catch {
    return false;
  }
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
 * Brings the objects of the commit's pointers that the runtime holds and this store lacks (none
 * when `wanted` is false: this host has no git-lfs to use them). An object that arrives damaged is
 * dropped (its file stays a pointer unless the host fetches it).
 */
export async function fillLfsStore({ ctx, inbox }: Intake, cache: string, spec: LfsSpec, wanted: boolean): Promise<void> {
  const seen = new Set<string>();
  const lacking = wanted ? spec.pointers.filter((p) => p.local && !seen.has(p.oid) && seen.add(p.oid) && !hasLfsObject(cache, p)) : [];
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
