// Drives the runtime executable the way Paseo does (docs/contract.md#invocation, docs/contract.md#exec): a fresh process per
// operation, a canonical lifecycle request on stdin, and for exec five pipes with the spawn
// envelope on fd3 and process events decoded from fd4 through Paseo's phase machine. The demo
// uses it so that what it shows is the real code path, not a shortcut into our modules.
import { spawn, type ChildProcess } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import type * as z from "zod";
import {
  DescribeResponseSchema,
  encodeCanonical,
  ExitEventSchema,
  Fd4PhaseMachine,
  FrameDecoder,
  LifecycleRequestSchema,
  OperationResponseSchema,
  parseJsonText,
  ProcessEventSchema,
  ResizeControlSchema,
  SignalControlSchema,
  SpawnControlSchema,
  validateMessage,
} from "../contract/index.js";
import { RuntimeError, oneLine } from "../shared/errors.js";

export type LifecycleRequest = z.input<typeof LifecycleRequestSchema>;
export type SpawnEnvelope = z.input<typeof SpawnControlSchema>;
export type ProcessEvent = z.output<typeof ProcessEventSchema>;
export type ExitResult = Pick<z.output<typeof ExitEventSchema>, "code" | "signal">;
export type OperationResponse = z.output<typeof OperationResponseSchema>;

/** How to start the runtime: argv prefix (e.g. `[node, dist/cli.js]`) and the daemon-like env. */
export interface RuntimeCommand {
  argv: string[];
  env?: NodeJS.ProcessEnv;
  /** Runtime id used in error texts, as Paseo words them. */
  id: string;
}

const OP_TIMEOUT_MS = 60_000;
const KILL_WAIT_MS = 750;
// Paseo allows the signal operation 750 ms; the demo's cleanup is a fallback and may be slower.
const SIGNAL_OP_TIMEOUT_MS = 5_000;

/** How one runtime process ended. */
export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
  /** Wall time from spawn to close, process start-up included. */
  ms: number;
}

function collect(stream: Readable | null, into: Buffer[]): void {
  stream?.on("data", (chunk: Buffer) => into.push(chunk));
}

/** Waits for `close`; SIGKILLs the process group and fails after `timeoutMs`. */
function finished(child: ChildProcess, what: string, timeoutMs: number): Promise<Finished> {
  const started = performance.now();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  collect(child.stdout, out);
  collect(child.stderr, err);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new RuntimeError("remote", `${what} did not finish within ${timeoutMs} ms`));
    }, timeoutMs);
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(new RuntimeError("remote", `${what} could not start: ${e.message}`));
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString("utf8"), ms: performance.now() - started });
    });
  });
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
}

function flagArgs(flags: Record<string, string>): string[] {
  return Object.entries(flags).flatMap(([name, value]) => [`--${name}`, value]);
}

function failure(cmd: RuntimeCommand, op: string, result: Finished): RuntimeError {
  const status = result.signal ?? String(result.code);
  return new RuntimeError("remote", `Workspace runtime ${cmd.id} ${op} failed (${status}): ${oneLine(result.stderr.trim())}`);
}

/**
 * Starts the runtime with `args` after its configured argv, as Paseo starts a non-exec operation:
 * three pipes (`signal`: stdout ignored, detached), `stdin` written then closed. Resolves however
 * the process ends; SIGKILLs its group and rejects after `timeoutMs`.
 */
export async function runRuntime(
  cmd: RuntimeCommand,
  args: string[],
  opts: { stdin?: string | Buffer; timeoutMs?: number; asSignal?: boolean } = {},
): Promise<Finished> {
  const child = spawn(cmd.argv[0]!, [...cmd.argv.slice(1), ...args], {
    env: cmd.env ?? process.env,
    stdio: opts.asSignal ? ["pipe", "ignore", "pipe"] : ["pipe", "pipe", "pipe"],
    detached: opts.asSignal === true,
  });
  const done = finished(child, args[0] ?? "runtime", opts.timeoutMs ?? OP_TIMEOUT_MS);
  // The operation may fail (or, like describe, finish) before reading its request.
  child.stdin!.on("error", () => undefined);
  child.stdin!.end(opts.stdin);
  return done;
}

/**
 * Runs one non-exec operation (`describe` when `request` is undefined) and returns its validated
 * response. Like Paseo: stdin gets one canonical line then EOF; any non-zero exit is a failure.
 */
export async function spawnOp(
  cmd: RuntimeCommand,
  op: string,
  flags: Record<string, string>,
  request: LifecycleRequest | undefined,
  timeoutMs = OP_TIMEOUT_MS,
): Promise<{ response: unknown; stdout: string; stderr: string }> {
  const result = await runRuntime(cmd, [op, ...flagArgs(flags)], {
    stdin: request === undefined ? undefined : encodeCanonical(LifecycleRequestSchema, request),
    timeoutMs,
    // `signal` runs as Paseo runs it: stdout ignored, detached (docs/contract.md#signal).
    asSignal: op === "signal",
  });
  if (result.code !== 0) throw failure(cmd, op, result);
  if (op === "signal") return { response: undefined, stdout: "", stderr: result.stderr };
  const text = result.stdout.toString("utf8");
  const schema = op === "describe" ? DescribeResponseSchema : OperationResponseSchema;
  const response = validateMessage(schema, parseJsonText(text), `Invalid ${op} response from ${cmd.id}: `, "remote");
  return { response, stdout: text, stderr: result.stderr };
}

export interface ExecHandle {
  /** Resolves with the fd4 `exit` result once fd4 ended and the wrapper closed (docs/contract.md#exec-finished). */
  exited: Promise<ExitResult>;
  /** Writes workload stdin (fd0). */
  stdin: Writable;
  /** Workload stdout bytes so far. */
  stdout(): Buffer;
  stderr(): Buffer;
  events(): ProcessEvent[];
  /** Resolves when fd4 carried `started`. */
  started: Promise<void>;
  /** PTY only: sends a resize control and resolves when its `resized` acknowledgement arrived. */
  resize(rows: number, cols: number): Promise<void>;
  /** PTY: fd3 signal control. Pipes: signal to the wrapper pid, which forwards it. */
  kill(signal: NodeJS.Signals): void;
}

/**
 * Starts `exec --workspace-id <id>` with five pipes, detached, writes the spawn envelope on fd3
 * (pipes: then closes fd3) and decodes fd4 strictly. On any protocol failure the exec is cleaned
 * up like Paseo does (signal operation with SIGKILL, then the wrapper's group) and `exited` rejects.
 */
/** `exec --workspace-id <id>` as Paseo starts it: five pipes (fd0-fd4), detached, nothing written yet. */
export function startExec(cmd: RuntimeCommand, workspaceId: string): ChildProcess {
  return spawn(cmd.argv[0]!, [...cmd.argv.slice(1), "exec", "--workspace-id", workspaceId], {
    env: cmd.env ?? process.env,
    stdio: ["pipe", "pipe", "pipe", "pipe", "pipe"],
    detached: true,
  });
}

export function execWorkload(cmd: RuntimeCommand, workspaceId: string, envelope: SpawnEnvelope, timeoutMs = OP_TIMEOUT_MS): ExecHandle {
  const mode = envelope.stdio.kind;
  const child = startExec(cmd, workspaceId);
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  collect(child.stdout, out);
  collect(child.stderr, err);
  const fd3 = child.stdio[3] as Writable;
  const fd4 = child.stdio[4] as Readable;
  const events: ProcessEvent[] = [];
  const phases = new Fd4PhaseMachine(mode);
  const decoder = new FrameDecoder(ProcessEventSchema);
  let resizeId = 0;
  const acks = new Map<number, () => void>();
  let markStarted: () => void = () => undefined;
  const started = new Promise<void>((resolve) => (markStarted = resolve));

  // fd0 and fd3 may break when the wrapper exits early; its stderr and fd4 tell the story.
  child.stdin!.on("error", () => undefined);
  fd3.on("error", () => undefined);
  fd3.write(encodeCanonical(SpawnControlSchema, envelope));
  if (mode === "pipes") fd3.end();

  const exited = new Promise<ExitResult>((resolve, reject) => {
    let fd4Ended = false;
    let closed = false;
    let settled = false;
    const fail = (message: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString("utf8").trim();
      void cleanup(cmd, workspaceId, envelope, child).then((cleanupError) => {
        const wrapper = stderr ? `; wrapper: ${oneLine(stderr)}` : "";
        const cleanupNote = cleanupError ? `; cleanup failed: ${cleanupError}` : "";
        reject(new RuntimeError("remote", `Workspace runtime ${cmd.id} ${mode} failed: ${message}${wrapper}${cleanupNote}`));
      });
    };
    const maybeDone = () => {
      if (settled || !fd4Ended || !closed) return;
      const exit = phases.exit;
      if (!exit) return fail(`${mode} wrapper ended without a valid fd4 exit event`);
      settled = true;
      clearTimeout(timer);
      resolve({ code: exit.code, signal: exit.signal });
    };
    const timer = setTimeout(() => fail(`no exit within ${timeoutMs} ms`), timeoutMs);
    fd4.on("data", (chunk: Buffer) => {
      try {
        for (const event of decoder.push(chunk)) {
          phases.accept(event);
          events.push(event);
          if (event.type === "error") return fail(event.message);
          if (event.type === "started") markStarted();
          if (event.type === "resized") acks.get(event.id)?.();
          if (event.type === "exit") {
            child.stdin!.end();
            fd3.end();
          }
        }
      } catch (e) {
        fail(e instanceof Error ? e.message : String(e));
      }
    });
    fd4.on("end", () => {
      try {
        decoder.end();
      } catch (e) {
        return fail(e instanceof Error ? e.message : String(e));
      }
      fd4Ended = true;
      maybeDone();
    });
    child.once("error", (e) => fail(`exec failed: ${e.message}`));
    child.once("close", () => {
      closed = true;
      maybeDone();
    });
  });
  // Callers await `exited`; `started` alone must not leak an unhandled rejection path.
  exited.catch(() => undefined);

  return {
    exited,
    stdin: child.stdin!,
    stdout: () => Buffer.concat(out),
    stderr: () => Buffer.concat(err),
    events: () => [...events],
    started,
    resize(rows, cols) {
      const id = ++resizeId;
      const acked = new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new RuntimeError("remote", "PTY resize acknowledgement timed out")), 1_000);
        acks.set(id, () => {
          clearTimeout(t);
          resolve();
        });
      });
      fd3.write(encodeCanonical(ResizeControlSchema, { type: "resize", protocolVersion: 1, id, rows, cols }));
      return acked;
    },
    kill(signal) {
      if (mode === "pty") fd3.write(encodeCanonical(SignalControlSchema, { type: "signal", protocolVersion: 1, signal }));
      else if (child.pid !== undefined) child.kill(signal);
    },
  };
}

/**
 * Paseo's forced cleanup (docs/contract.md#cleanup), bounded: signal op SIGKILL, then the wrapper's group.
 * Returns the signal operation's failure, if any, for the caller's message.
 */
async function cleanup(
  cmd: RuntimeCommand,
  workspaceId: string,
  envelope: SpawnEnvelope,
  child: ChildProcess,
): Promise<string | undefined> {
  const request: LifecycleRequest = { protocolVersion: 1, runtimeInstanceId: envelope.runtimeInstanceId, options: envelope.options };
  const flags = { "workspace-id": workspaceId, "exec-id": envelope.execId, signal: "SIGKILL" };
  const signalError = await spawnOp(cmd, "signal", flags, request, SIGNAL_OP_TIMEOUT_MS).then(
    () => undefined,
    (e: unknown) => (e instanceof Error ? e.message : String(e)),
  );
  killGroup(child);
  if (child.exitCode === null && child.signalCode === null) {
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, KILL_WAIT_MS);
      child.once("close", () => {
        clearTimeout(t);
        resolve();
      });
    });
  }
  return signalError;
}

/** Runs an exec to completion with `input` as the whole of its stdin. */
export async function runWorkload(
  cmd: RuntimeCommand,
  workspaceId: string,
  envelope: SpawnEnvelope,
  input: string | Buffer = "",
): Promise<ExitResult & { stdout: Buffer; stderr: Buffer }> {
  const handle = execWorkload(cmd, workspaceId, envelope);
  handle.stdin.end(input);
  const exit = await handle.exited;
  return { ...exit, stdout: handle.stdout(), stderr: handle.stderr() };
}
