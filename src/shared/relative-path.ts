// Lexical validation of workspace-relative paths (create's relativeCwd, a git source's
// subdirectory). Runs before anything is created remotely; the agent repeats the check with
// realpath after checkout because only that sees symlinks. Built-ins only (bundled into the agent).
import { RuntimeError } from "./errors.js";

export const CWD_ESCAPE_MESSAGE = "Workspace cwd escapes its root";

/**
 * Returns the normalised relative path ("" for the root itself) or throws the fixed escape text
 * for absolute paths, `..` segments, backslashes and NUL bytes.
 */
export function normaliseRelativePath(value: string | undefined): string {
  if (value === undefined || value === "" || value === ".") return "";
  if (value.startsWith("/") || value.includes("\\") || value.includes("\0")) throw new RuntimeError("input", CWD_ESCAPE_MESSAGE);
  const parts = value.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.some((p) => p === "..")) throw new RuntimeError("input", CWD_ESCAPE_MESSAGE);
  return parts.join("/");
}
