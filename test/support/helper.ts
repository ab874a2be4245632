// Runs the built dist/paseo-workspace-helper.cjs as a real child process in throw-away
// workspaces, the way Paseo launches it: cwd = workspace root, stdio pipes, env {} (no PATH).
import { spawn, execFileSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, rmdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const HELPER = join(REPO_ROOT, "dist", "paseo-workspace-helper.cjs");
/** Set HELPER_TEST_NODE to an older node (e.g. 18) to prove the bundle runs there too. */
export const NODE = process.env.HELPER_TEST_NODE ?? process.execPath;

function newestSourceMtime(directory: string): number {
  let newest = 0;
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSourceMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function helperIsFresh(): boolean {
  return existsSync(HELPER) && statSync(HELPER).mtimeMs >= newestSourceMtime(join(REPO_ROOT, "helper", "src"));
}

/**
 * Builds dist/ when the helper bundle is missing or older than its sources. Test files run in
 * parallel workers, so a lock directory serialises the build; the wait is bounded.
 */
export function ensureHelperBuilt(): void {
  if (helperIsFresh()) return;
  const lock = join(REPO_ROOT, "dist", ".helper-test-build.lock");
  mkdirSync(dirname(lock), { recursive: true });
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (helperIsFresh()) return;
      // A lock left by a killed run (builds take seconds) must not block later runs.
      if (Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > 120_000)
        rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`helper build lock still held: ${lock}`);
      execFileSync("sleep", ["0.2"]);
    }
  }
  try {
    if (helperIsFresh()) return;
    try {
      execFileSync(process.execPath, [join(REPO_ROOT, "scripts", "build.mjs")], { cwd: REPO_ROOT, stdio: "pipe" });
    } catch (err) {
      // The helper is bundled first; a teammate's broken agent/cli source must not block these tests.
      if (!helperIsFresh()) throw err;
    }
  } finally {
    rmdirSync(lock);
  }
}

export interface Fixture {
  parent: string;
  workspace: string;
  path(...parts: string[]): string;
  cleanup(): void;
}

/** `parent/workspace/` (docs/contract.md#helper-protocol fixture convention), canonical paths. */
export function makeFixture(): Fixture {
  const parent = realpathSync(mkdtempSync(join(tmpdir(), "paseo-helper-")));
  const workspace = join(parent, "workspace");
  mkdirSync(workspace);
  return {
    parent,
    workspace,
    path: (...parts) => join(workspace, ...parts),
    cleanup: () => rmSync(parent, { recursive: true, force: true }),
  };
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
}

export interface RunOptions {
  cwd: string;
  env?: NodeJS.ProcessEnv;
  input?: string | Buffer;
  timeoutMs?: number;
  helper?: string;
}

export function startHelper(args: string[], options: RunOptions): ChildProcessWithoutNullStreams {
  return spawn(NODE, [options.helper ?? HELPER, ...args], { cwd: options.cwd, env: options.env ?? {}, stdio: "pipe" });
}

export function collect(child: ChildProcessWithoutNullStreams, timeoutMs = 10_000): Promise<RunResult> {
  const stdout: Buffer[] = [];
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`helper did not exit within ${timeoutMs} ms; stderr: ${stderr}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(stdout), stderr });
    });
  });
}

export function runHelper(args: string[], options: RunOptions): Promise<RunResult> {
  const child = startHelper(args, options);
  const done = collect(child, options.timeoutMs);
  child.stdin.on("error", () => undefined); // the helper may exit without reading stdin
  child.stdin.end(options.input ?? "");
  return done;
}

/** Runs a one-shot JSON command and checks the protocol's success conventions. */
export async function runJson(args: string[], options: RunOptions): Promise<Record<string, unknown>> {
  const result = await runHelper(args, options);
  if (result.code !== 0) throw new Error(`helper ${args.join(" ")} exited ${result.code ?? result.signal}: ${result.stderr}`);
  const text = result.stdout.toString("utf8");
  if (!text.endsWith("\n") || text.indexOf("\n") !== text.length - 1)
    throw new Error(`expected one JSON line, got ${JSON.stringify(text)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** Expects a hard error: exit 1, empty stdout, exactly one stderr line; returns that line. */
export async function runHardError(args: string[], options: RunOptions): Promise<string> {
  const result = await runHelper(args, options);
  if (result.code !== 1 || result.stdout.length !== 0) {
    throw new Error(`expected a hard error from ${args.join(" ")}, got code ${result.code}, stdout ${result.stdout.toString()}`);
  }
  const lines = result.stderr.split("\n");
  if (lines.length !== 2 || lines[1] !== "") throw new Error(`expected one stderr line, got ${JSON.stringify(result.stderr)}`);
  return lines[0] as string;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
