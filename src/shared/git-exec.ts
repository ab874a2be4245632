// Runs git as a child process with a bounded time, a predictable environment and one-line errors.
// Shared by the runtime (reading the local project repo) and the remote agent (caches and
// checkouts), so it uses Node built-ins only.
import { spawn } from "node:child_process";
import { setPriority } from "node:os";
import type { Readable, Writable } from "node:stream";
import { RuntimeError, oneLine, type ErrorClass } from "./errors.js";

/** Variables that would point git at another repository or change its output format. */
const DROPPED =
  /^GIT_(DIR|WORK_TREE|INDEX_FILE|OBJECT_DIRECTORY|ALTERNATE_OBJECT_DIRECTORIES|NAMESPACE|COMMON_DIR|PREFIX|CEILING_DIRECTORIES)$/;

export function gitEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!DROPPED.test(k)) env[k] = v;
  // Never wait for a credential prompt nobody can answer; parse messages in one language.
  env.GIT_TERMINAL_PROMPT = "0";
  env.LC_ALL = "C";
  return { ...env, ...extra };
}

export interface GitOptions {
  cwd?: string;
  input?: string;
  timeoutMs?: number;
  /** Error class for a non-zero exit (default "remote"). */
  errorClass?: ErrorClass;
  /** Exit codes that are answers rather than failures (e.g. 1 for `cat-file -e`). */
  okCodes?: number[];
  /** Variables for this git child only (set after the inherited ones are filtered). */
  env?: Record<string, string>;
  /** Background work: the child (and its workers) get the lowest CPU priority. */
  background?: boolean;
  /** Kills the child when aborted (its owner is going away). */
  signal?: AbortSignal;
}

export interface GitResult {
  code: number;
  stdout: string;
  /** The last 4000 characters git wrote to stderr (warnings, or errors it did not exit for). */
  stderr: string;
}

const DEFAULT_TIMEOUT_MS = 120_000;

/** Runs `git <args>` and returns its stdout; a failure becomes one actionable line. */
export async function git(args: string[], opts: GitOptions = {}): Promise<string> {
  return (await gitResult(args, opts)).stdout;
}

export function gitResult(args: string[], opts: GitOptions = {}): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    const child = spawn("git", args, { cwd: opts.cwd, env: gitEnv(opts.env), stdio: ["pipe", "pipe", "pipe"] });
    if (opts.background && child.pid !== undefined) {
      try {
        setPriority(child.pid, 19);
      } catch {
        // best effort: it still runs, at normal priority
      }
    }
    const out: Buffer[] = [];
    let err = "";
    const kill = () => child.kill("SIGKILL");
    const timer = setTimeout(kill, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    if (opts.signal?.aborted) kill();
    opts.signal?.addEventListener("abort", kill);
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => (err = (err + c.toString("utf8")).slice(-4000)));
    child.stdin.on("error", () => undefined);
    child.stdin.end(opts.input ?? "");
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(new RuntimeError("remote-dependency", `git is not available: ${e.message}`, { code: "git-missing" }));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", kill);
      const stdout = Buffer.concat(out).toString("utf8");
      if (code === 0 || (code !== null && opts.okCodes?.includes(code))) return resolve({ code, stdout, stderr: err });
      reject(gitFailure(args, code, signal, err, opts.errorClass));
    });
  });
}

export function gitFailure(
  args: string[],
  code: number | null,
  signal: string | null,
  stderr: string,
  errorClass: ErrorClass = "remote",
): RuntimeError {
  const why = signal ? `killed by ${signal}` : `exit ${code}`;
  const detail = oneLine(stderr).slice(0, 400);
  return new RuntimeError(errorClass, `git ${args[0] ?? ""} failed (${why})${detail ? `: ${detail}` : ""}`, { code: "git-failed" });
}

/** A long-running git child whose stdin/stdout the caller streams (pack transfer). */
export interface GitStream {
  stdin: Writable;
  stdout: Readable;
  kill(): void;
  /** Resolves on exit 0, rejects with a one-line error otherwise (bounded by timeoutMs). */
  done: Promise<void>;
}

export function gitStream(args: string[], opts: Omit<GitOptions, "input" | "okCodes"> = {}): GitStream {
  const child = spawn("git", args, { cwd: opts.cwd, env: gitEnv(opts.env), stdio: ["pipe", "pipe", "pipe"] });
  let err = "";
  child.stderr.on("data", (c: Buffer) => (err = (err + c.toString("utf8")).slice(-4000)));
  child.stdin.on("error", () => undefined);
  const done = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(new RuntimeError("remote-dependency", `git is not available: ${e.message}`, { code: "git-missing" }));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(gitFailure(args, code, signal, err, opts.errorClass));
    });
  });
  done.catch(() => undefined);
  return { stdin: child.stdin, stdout: child.stdout, kill: () => child.kill("SIGKILL"), done };
}

export const SHA_RE = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/**
 * The offered commit ids this repository has: pack-objects refuses unknown negative revisions,
 * so negotiation bases from the other side are filtered through this first.
 */
export async function knownCommits(repo: string, offered: string[], errorClass: ErrorClass = "remote"): Promise<string[]> {
  const shas = offered.filter((s) => SHA_RE.test(s));
  if (shas.length === 0) return [];
  const r = await gitResult(["cat-file", "--batch-check=%(objectname) %(objecttype)"], {
    cwd: repo,
    input: shas.join("\n") + "\n",
    errorClass,
  });
  return r.stdout
    .split("\n")
    .map((l) => l.split(" "))
    .filter(([sha, type]) => type === "commit" && sha !== undefined && SHA_RE.test(sha))
    .map(([sha]) => sha as string);
}

/**
 * Runs `git <args>` and hands each NUL-terminated record of its stdout (`-z` output) to `take` as
 * it arrives, so a listing of a huge tree or index never sits in memory whole.
 */
export async function gitRecords(
  args: string[],
  opts: Omit<GitOptions, "input" | "okCodes">,
  take: (record: string) => void,
): Promise<void> {
  const ls = gitStream(args, opts);
  ls.stdin.end();
  let rest = "";
  try {
    for await (const chunk of ls.stdout as AsyncIterable<Buffer>) {
      const records = (rest + chunk.toString("utf8")).split("\0");
      rest = records.pop() ?? "";
      records.forEach(take);
    }
  } catch (err) {
    ls.kill();
    throw err;
  }
  if (rest) take(rest);
  await ls.done;
}
