// fs-write (docs/contract.md#helper-commands): replaces an existing file atomically from stdin, guarded by revision or
// mtime preconditions. It never creates a file: callers use fs-create-entry for that.
import { randomUUID } from "node:crypto";
import { open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { modifiedAtOf, NOT_A_FILE, revisionOf, statBig, statResult } from "./file-info.js";
import { isMissingError, resolveScoped } from "./scope.js";

export interface WriteRequest {
  rawPath: string | undefined;
  expectedRevision: string | undefined;
  expectedModifiedAt: string | undefined;
}

async function conflict(root: string, rawPath: string | undefined): Promise<object> {
  return { status: "conflict", version: await statResult(root, rawPath) };
}

async function copyStdinInto(tempPath: string, mode: number): Promise<void> {
  // `wx`: never clobber anything; the original mode is requested and the umask still applies.
  const handle = await open(tempPath, "wx", mode);
  try {
    for await (const chunk of process.stdin) await handle.write(chunk as Buffer);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export async function writeFromStdin(root: string, request: WriteRequest): Promise<object> {
  const missing = { status: "conflict", version: { status: "missing", path: request.rawPath ?? "." } };
  let target: string;
  let before;
  try {
    target = (await resolveScoped(root, request.rawPath)).absolute;
    before = await statBig(target);
  } catch (err) {
    // Answered without reading stdin, like the reference.
    if (isMissingError(err)) return missing;
    throw err;
  }
  if (!before.isFile()) return { status: "error", error: NOT_A_FILE };
  if (request.expectedRevision) {
    if (request.expectedRevision !== revisionOf(before)) return conflict(root, request.rawPath);
  } else if (request.expectedModifiedAt) {
    if (request.expectedModifiedAt !== modifiedAtOf(before)) return conflict(root, request.rawPath);
  }

  const temp = join(dirname(target), `.${basename(target)}.paseo-${randomUUID()}.tmp`);
  try {
    await copyStdinInto(temp, Number(before.mode) & 0o7777);
    const current = await statBig(target).catch((err: unknown) => {
      if (isMissingError(err)) return undefined;
      throw err;
    });
    if (current === undefined || revisionOf(current) !== revisionOf(before)) return conflict(root, request.rawPath);
    await rename(temp, target);
    const after = await statBig(target);
    return { status: "written", modifiedAt: modifiedAtOf(after), size: Number(after.size), revision: revisionOf(after) };
  } finally {
    // After a successful rename the temp name is gone and this fails quietly, as intended.
    await unlink(temp).catch(() => undefined);
  }
}
