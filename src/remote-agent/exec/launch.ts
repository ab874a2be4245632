// Turns a validated exec request into what is handed to spawn: the canonical working directory
// (never outside the workspace root, symlinks included), the program file (looked up on the
// envelope's own PATH, never through a shell), and the stdio layout that carries the process tag.
// Shared by the pipes path (control agent) and the PTY path (pty-attach spawns what this decides).
import { accessSync, closeSync, constants, mkdirSync, openSync, realpathSync, statSync } from "node:fs";
import { isAbsolute, join, relative, resolve } from "node:path";
import type { StdioOptions } from "node:child_process";
import { RuntimeError } from "../../shared/errors.js";
import { TAG_FD } from "../proc/process-set.js";
import { realSpelling } from "../proc/process-tags.js";
import { verifiedFile } from "../verified-file.js";

declare const __HELPER_SOURCE__: string;

export const HELPER_NAME = "paseo-workspace-helper";
/**
 * PATH used when the envelope env has none, as execvp(3) does: the workload still gets exactly the
 * envelope env (no PATH added); this only decides where a bare argv[0] is looked up.
 */
export const DEFAULT_SEARCH_PATH = "/usr/bin:/bin";

export interface Launch {
  /** Program file passed to execve. */
  file: string;
  args: string[];
  /** argv[0] as the program sees it (the name the envelope gave). */
  argv0: string;
  cwd: string;
}

/** Paseo's command-runtime tests assert this text for every escape (contract §8.9). */
export const EXEC_CWD_ESCAPE_MESSAGE = "Workspace cwd escapes its runtime root";

export function cwdEscapes(): RuntimeError {
  return new RuntimeError("input", EXEC_CWD_ESCAPE_MESSAGE);
}

const outside = (root: string, path: string): boolean => {
  const rel = relative(root, path);
  return rel === ".." || rel.startsWith("../") || isAbsolute(rel);
};

/**
 * Canonical cwd for a workload, resolved as Paseo's reference fixture does:
 * `realpath(resolve(root, cwd))` judged against `realpath(root)`. So an absolute path inside the
 * root (Paseo's client sends `placement.cwd` and paths under it) is accepted, and a symlink inside
 * the checkout cannot lead outside it. A backslash is refused up front: it is a `..\x` escape on
 * the Windows side of Paseo.
 */
export function resolveWorkloadCwd(root: string, cwd: string | undefined): string {
  const realRoot = realpathSync(root);
  if (cwd === undefined || cwd === "" || cwd === ".") return realRoot;
  if (cwd.includes("\\")) throw cwdEscapes();
  let target: string;
  try {
    target = realpathSync(resolve(realRoot, cwd));
  } catch {
    // A path that does not exist still escapes if it would lie outside (`../outside`); judged
    // where its deepest existing directory really is, so the root spelled through a symlink is in.
    if (outside(realRoot, realSpelling(resolve(realRoot, cwd)))) throw cwdEscapes();
    throw new RuntimeError("input", `Workspace cwd does not exist: ${cwd}`);
  }
  if (outside(realRoot, target)) throw cwdEscapes();
  if (!statSync(target).isDirectory()) throw new RuntimeError("input", `Workspace cwd is not a directory: ${cwd}`);
  return target;
}

function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Looks a bare name up on `searchPath` like execvp; empty entries mean the working directory. */
export function findOnPath(name: string, searchPath: string, cwd: string): string | null {
  for (const dir of searchPath.split(":")) {
    const candidate = resolve(cwd, dir === "" ? "." : dir, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  return null;
}

/**
 * The embedded helper next to the agent, extracted atomically (a concurrent reader never sees half
 * a file) and run only while it holds exactly the embedded text (verified-file.ts).
 */
export function ensureHelper(agentDir: string): string {
  mkdirSync(agentDir, { recursive: true, mode: 0o700 });
  return verifiedFile(join(agentDir, "helper.cjs"), __HELPER_SOURCE__, 0o700);
}

/**
 * Decides what to execve. A bare `paseo-workspace-helper` is always our embedded helper run by
 * this agent's node (it must resolve without PATH); any other bare name is looked up on the
 * envelope env's PATH; names with a slash are used as given (relative to the cwd, like execvp).
 * Returns null when a bare name is not found (reported like a shell: exit 127).
 */
export function resolveLaunch(argv: string[], env: Record<string, string>, cwd: string, agentDir: string, nodePath: string): Launch | null {
  const [name, ...args] = argv as [string, ...string[]];
  if (name === HELPER_NAME) return { file: nodePath, args: [ensureHelper(agentDir), ...args], argv0: nodePath, cwd };
  if (name.includes("/")) return { file: resolve(cwd, name), args, argv0: name, cwd };
  const file = findOnPath(name, env.PATH ?? DEFAULT_SEARCH_PATH, cwd);
  return file ? { file, args, argv0: name, cwd } : null;
}

/** stdio for spawn: the three standard streams, closed fds up to TAG_FD, then the tag descriptor. */
export function taggedStdio(std: StdioOptions & unknown[], tagFd: number): StdioOptions {
  const stdio: unknown[] = [...std];
  while (stdio.length < TAG_FD) stdio.push("ignore");
  stdio.push(tagFd);
  return stdio as StdioOptions;
}

/** Creates (empty) and opens an exec's tag file; the caller closes the descriptor after spawn. */
export function openTag(tagPath: string): number {
  return openSync(tagPath, "w", 0o600);
}

export function closeTag(fd: number): void {
  closeSync(fd);
}
