// Workspace confinement (docs/contract.md#helper-confinement): the helper itself is the security boundary for every path
// Paseo hands it, so absolute paths, `..` escapes and symlink escapes are refused here.
import { realpath } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";

export const OUTSIDE_MESSAGE = "Access outside of workspace is not allowed";

export interface Scoped {
  /** Canonical (symlink-resolved) path; for a missing leaf the lexical absolute path. All I/O goes here. */
  absolute: string;
  /** Lexical workspace-relative path with `/` separators; `.` for the root. */
  relative: string;
}

export function outsideError(): Error {
  return new Error(OUTSIDE_MESSAGE);
}

export function isOutsideError(err: unknown): boolean {
  return err instanceof Error && err.message === OUTSIDE_MESSAGE;
}

/** ENOENT, ENOTDIR and ELOOP all mean "not there" to the protocol. */
export function isMissingError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === "ENOENT" || code === "ENOTDIR" || code === "ELOOP";
}

export function normalizeRelative(rel: string): string {
  return rel === "" ? "." : rel.split(sep).join("/");
}

// A prefix test on relative(): `..foo` counts as outside. A false positive, never a hole, kept
// for byte compatibility with the reference helper.
function isInside(base: string, target: string): boolean {
  const rel = relative(base, target);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

export async function resolveScoped(root: string, requestedPath = "."): Promise<Scoped> {
  if (isAbsolute(requestedPath)) throw outsideError();
  const requested = resolve(root, requestedPath);
  if (!isInside(root, requested)) throw outsideError();
  const rel = normalizeRelative(relative(root, requested));
  const canonicalRoot = await realpath(root);
  let canonical: string;
  try {
    canonical = await realpath(requested);
  } catch (err) {
    if (!isMissingError(err)) throw err;
    const parent = await realpath(dirname(requested));
    if (!isInside(canonicalRoot, parent)) throw outsideError();
    return { absolute: requested, relative: rel };
  }
  if (!isInside(canonicalRoot, canonical)) throw outsideError();
  return { absolute: canonical, relative: rel };
}
