// File metadata shared by fs-stat, fs-write and fs-list: revision strings (docs/contract.md#helper-revisions), timestamps
// and the kind/encoding/mimeType classification (docs/contract.md#helper-revisions).
import type { BigIntStats } from "node:fs";
import { open, stat } from "node:fs/promises";
import { extname } from "node:path";
import { errorMessage } from "./output.js";
import { isMissingError, resolveScoped } from "./scope.js";

export const NOT_A_FILE = "Requested path is not a file";

/** `<dev>:<ino>:<size>:<mtimeNs>` from a nanosecond stat; only equality matters to clients. */
export function revisionOf(stats: BigIntStats): string {
  return `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeNs}`;
}

/** mtime as ISO-8601 with milliseconds, the precision `--expected-modified-at` compares at. */
export function modifiedAtOf(stats: BigIntStats): string {
  return new Date(Number(stats.mtimeMs)).toISOString();
}

export function statBig(path: string): Promise<BigIntStats> {
  return stat(path, { bigint: true });
}

interface Classification {
  kind: "text" | "image" | "binary";
  encoding: "utf-8" | "binary";
  mimeType: string;
}

const IMAGE_TYPES: Readonly<Record<string, string>> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".svg": "image/svg+xml",
};

const SAMPLE_BYTES = 8192;

// The sample is decoded as-is, so a multi-byte character cut at byte 8192 makes the file
// binary: a reference quirk reproduced on purpose.
function looksBinary(sample: Buffer): boolean {
  if (sample.length === 0) return false;
  if (sample.includes(0)) return true;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(sample);
  } catch {
    return true;
  }
  let control = 0;
  for (const byte of sample) {
    if ((byte < 32 && byte !== 9 && byte !== 10 && byte !== 13) || byte === 127) control += 1;
  }
  return control / sample.length > 0.3;
}

async function readSample(path: string, size: number): Promise<Buffer> {
  const handle = await open(path, "r");
  try {
    const buffer = Buffer.alloc(Math.min(SAMPLE_BYTES, size));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

export async function classify(canonicalPath: string, size: number): Promise<Classification> {
  const extension = extname(canonicalPath).toLowerCase();
  const image = IMAGE_TYPES[extension];
  if (image !== undefined) return { kind: "image", encoding: "binary", mimeType: image };
  if (looksBinary(await readSample(canonicalPath, size))) {
    return { kind: "binary", encoding: "binary", mimeType: "application/octet-stream" };
  }
  return { kind: "text", encoding: "utf-8", mimeType: extension === ".json" ? "application/json" : "text/plain" };
}

export type StatResult =
  | {
      status: "ready";
      path: string;
      kind: Classification["kind"];
      encoding: Classification["encoding"];
      mimeType: string;
      size: number;
      modifiedAt: string;
      revision: string;
    }
  | { status: "missing"; path: string }
  | { status: "error"; path: string; error: string };

/**
 * The fs-stat answer for `rawPath`. Never throws: missing and failing paths become results that
 * echo the raw request, a ready file reports its normalised path.
 */
export async function statResult(root: string, rawPath: string | undefined): Promise<StatResult> {
  const echoed = rawPath ?? ".";
  try {
    const scoped = await resolveScoped(root, rawPath);
    const stats = await statBig(scoped.absolute);
    if (!stats.isFile()) return { status: "error", path: scoped.relative, error: NOT_A_FILE };
    const size = Number(stats.size);
    const { kind, encoding, mimeType } = await classify(scoped.absolute, size);
    return {
      status: "ready",
      path: scoped.relative,
      kind,
      encoding,
      mimeType,
      size,
      modifiedAt: modifiedAtOf(stats),
      revision: revisionOf(stats),
    };
  } catch (err) {
    if (isMissingError(err)) return { status: "missing", path: echoed };
    return { status: "error", path: echoed, error: errorMessage(err) };
  }
}
