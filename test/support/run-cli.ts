// Runs the built runtime executable (dist/cli.js) the way Paseo does: a fresh node process per
// operation, the request written to stdin and stdin closed. Shared by every team's CLI tests;
// run `npm run build` first.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { encodeCanonical, LifecycleRequestSchema, type LifecycleRequest, type Options } from "../../src/contract/index.js";

export const CLI_PATH = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));

/** A fixed, well-formed runtimeInstanceId (64 lowercase hex) for requests built by tests. */
export const TEST_RUNTIME_INSTANCE_ID = "5e1f0c0ffee0ddba11cafe5eed0f00d5e1f0c0ffee0ddba11cafe5eed0f00d00";

export interface CliResult {
  code: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: string;
  /** Wall time from spawn to exit, process start-up included. */
  ms: number;
}

export interface RunCliOptions {
  /** Written to stdin, then stdin is closed (closed without data when absent). */
  stdin?: string | Buffer;
  env?: NodeJS.ProcessEnv;
  /** The child is SIGKILLed and the promise rejects after this long (default 30 s). */
  timeoutMs?: number;
}

export function runCli(args: string[], opts: RunCliOptions = {}): Promise<CliResult> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, [CLI_PATH, ...args], {
      env: opts.env ?? process.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    // An operation that never reads stdin (describe) may exit before we finish writing.
    child.stdin.on("error", () => {});
    child.stdin.end(opts.stdin ?? "");
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`runCli ${args.join(" ")} timed out after ${timeoutMs} ms; stderr: ${Buffer.concat(stderr).toString()}`));
    }, timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({
        code,
        signal,
        stdout: Buffer.concat(stdout),
        stderr: Buffer.concat(stderr).toString("utf8"),
        ms: performance.now() - started,
      });
    });
  });
}

/** A canonical lifecycle request line (with its `\n`), as Paseo writes it on stdin. */
export function lifecycleRequest(options: Options = {}, extra: Partial<Omit<LifecycleRequest, "options">> = {}): string {
  return encodeCanonical(LifecycleRequestSchema, {
    protocolVersion: 1,
    runtimeInstanceId: TEST_RUNTIME_INSTANCE_ID,
    ...extra,
    options,
  });
}
