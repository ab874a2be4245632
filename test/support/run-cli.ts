// Runs the built runtime executable (dist/cli.js) the way Paseo does, through the Paseo-like
// driver the demo uses (src/demo/runtime-driver.ts): a fresh node process per operation, the request
// written to stdin and stdin closed. Run `npm run build` first.
import { fileURLToPath } from "node:url";
import { encodeCanonical, LifecycleRequestSchema, type LifecycleRequest, type Options } from "../../src/contract/index.js";
import { runRuntime, type Finished, type RuntimeCommand } from "../../src/demo/runtime-driver.js";

export const CLI_PATH = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));

/** A fixed, well-formed runtimeInstanceId (64 lowercase hex) for requests built by tests. */
export const TEST_RUNTIME_INSTANCE_ID = "5e1f0c0ffee0ddba11cafe5eed0f00d5e1f0c0ffee0ddba11cafe5eed0f00d00";

export type CliResult = Finished;

export interface RunCliOptions {
  /** Written to stdin, then stdin is closed (closed without data when absent). */
  stdin?: string | Buffer;
  env?: NodeJS.ProcessEnv;
  /** The child is SIGKILLed and the promise rejects after this long (default 30 s). */
  timeoutMs?: number;
}

/** The built executable as the driver starts it. */
export function cliCommand(env?: NodeJS.ProcessEnv): RuntimeCommand {
  return { argv: [process.execPath, CLI_PATH], id: "test", ...(env ? { env } : {}) };
}

/** Runs `dist/cli.js <args…>`; resolves however it ends (exit code, stdout, stderr, wall time). */
export function runCli(args: string[], opts: RunCliOptions = {}): Promise<CliResult> {
  return runRuntime(cliCommand(opts.env), args, { stdin: opts.stdin ?? "", timeoutMs: opts.timeoutMs ?? 30_000 });
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
