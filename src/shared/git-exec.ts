// Runs git as a child process with a bounded time, a predictable environment and one-line errors.
// Shared by the runtime (reading the local project repo) and the remote agent (caches and
// checkouts), so it uses Node built-ins only.
import { setPriority } from "node:os";
import type { Readable, Writable } from "node:stream";
import { spawnGroup, type GroupChild } from "./child-group.js";
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

/**
 * Starts git leading its own process group (child-group.ts): a timeout or an abort ends what it
 * started too (an LFS filter, ssh, hooks), and the wait for its pipes is bounded.
 */
function startGit(args: string[], opts: GitOptions): GroupChild {
  const g = spawnGroup("git", args, {
    cwd: opts.cwd,
    env: gitEnv(opts.env),
    stdin: "pipe",
    timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
  });
  g.child.stdin?.on("error", () => undefined);
  if (opts.background && g.child.pid !== undefined) {
    try {
      setPriority(g.child.pid, 19);
    } catch {
      // best effort: it still runs, at normal priority
    }
  }
  if (opts.signal?.aborted) g.kill();
  opts.signal?.addEventListener("abort", g.kill);
  void g.ended.then(
    () => opts.signal?.removeEventListener("abort", g.kill),
    () => opts.signal?.removeEventListener("abort", g.kill),
  );
  return g;
}

const notAvailable = (e: Error) => new RuntimeError("remote-dependency", `git is not available: ${e.message}`, { code: "git-missing" });

export async function gitResult(args: string[], opts: GitOptions = {}): Promise<GitResult> {
  const g = startGit(args, opts);
  const out: Buffer[] = [];
  let err = "";
  g.child.stdout.on("data", (c: Buffer) => out.push(c));
  g.child.stderr.on("data", (c: Buffer) => (err = (err + c.toString("utf8")).slice(-4000)));
  g.child.stdin?.end(opts.input ?? "");
  const end = await g.ended.catch((e: Error) => {
    throw notAvailable(e);
  });
  const stdout = Buffer.concat(out).toString("utf8");
  const { code } = end;
  if (!end.timedOut && (code === 0 || (code !== null && opts.okCodes?.includes(code)))) return { code, stdout, stderr: err };
  throw gitFailure(args, code, end.signal, err, opts.errorClass, end.timedOut ? (opts.timeoutMs ?? DEFAULT_TIMEOUT_MS) : undefined);
}

/** Top-level options of git that take the next argument as their value. */
const OPTION_WITH_VALUE = new Set(["-c", "-C", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix"]);

/** The subcommand `args` run (`checkout` of `-c k=v -C dir checkout ...`), for error messages. */
export function gitSubcommand(args: string[]): string {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (OPTION_WITH_VALUE.has(a)) i++;
    else if (!a.startsWith("-")) return a;
  }
  return "";
}

/** git's fatal exit and its first line when no repository is found from the directory (git >= 1.8). */
const NOT_A_REPOSITORY_EXIT = 128;
const NOT_A_REPOSITORY = /^fatal: not a git repository\b/m;

/** One line naming the subcommand and why it failed; `timedOutMs`: the timeout killed it. */
export function gitFailure(
  args: string[],
  code: number | null,
  signal: string | null,
  stderr: string,
  errorClass: ErrorClass = "remote",
  timedOutMs?: number,
): RuntimeError {
  const detail = oneLine(stderr).slice(0, 400);
  const what = `git ${gitSubcommand(args)}`.trimEnd();
  const why =
    timedOutMs !== undefined ? `did not finish within ${timedOutMs} ms` : `failed (${signal ? `killed by ${signal}` : `exit ${code}`})`;
  // Read here, where git's own output is interpreted, so that callers branch on the code.
  const notRepo = code === NOT_A_REPOSITORY_EXIT && NOT_A_REPOSITORY.test(stderr);
  return new RuntimeError(errorClass, `${what} ${why}${detail ? `: ${detail}` : ""}`, {
    code: notRepo ? "git-not-a-repository" : "git-failed",
  });
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
  const g = startGit(args, opts);
  let err = "";
  g.child.stderr.on("data", (c: Buffer) => (err = (err + c.toString("utf8")).slice(-4000)));
  const done = g.ended.then(
    (end) => {
      if (end.code === 0 && !end.timedOut) return;
      throw gitFailure(args, end.code, end.signal, err, opts.errorClass, end.timedOut ? (opts.timeoutMs ?? DEFAULT_TIMEOUT_MS) : undefined);
    },
    (e: Error) => {
      throw notAvailable(e);
    },
  );
  done.catch(() => undefined);
  return { stdin: g.child.stdin!, stdout: g.child.stdout, kill: g.kill, done };
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
 * it arrives, so a listing of a huge tree or index never sits in memory whole; a `take` that
 * returns a promise holds the listing back until it settles. Records are bytes, as paths are to
 * git: a name that is not UTF-8 (Latin-1) must reach the file system as it is. `take` gets a view
 * of the chunk and copies what it keeps.
 */
export async function gitRecordBytes(
  args: string[],
  opts: Omit<GitOptions, "input" | "okCodes">,
  take: (record: Buffer) => void | Promise<void>,
): Promise<void> {
  const ls = gitStream(args, opts);
  ls.stdin.end();
  let rest = Buffer.alloc(0);
  try {
    for await (const chunk of ls.stdout as AsyncIterable<Buffer>) {
      const data = rest.length > 0 ? Buffer.concat([rest, chunk]) : chunk;
      let start = 0;
      for (let nul = data.indexOf(0, start); nul !== -1; nul = data.indexOf(0, start)) {
        const held = take(data.subarray(start, nul));
        if (held) await held;
        start = nul + 1;
      }
      rest = Buffer.from(data.subarray(start));
    }
  } catch (err) {
    ls.kill();
    throw err;
  }
  if (rest.length > 0) await take(rest);
  await ls.done;
}

/**
 * gitRecords as text. Records are decoded whole: decoding chunk by chunk turned a path whose
 * multi-byte character a chunk split into U+FFFD, and the checkout check then failed the create.
 */
export function gitRecords(
  args: string[],
  opts: Omit<GitOptions, "input" | "okCodes">,
  take: (record: string) => void | Promise<void>,
): Promise<void> {
  return gitRecordBytes(args, opts, (r) => take(r.toString("utf8")));
}
