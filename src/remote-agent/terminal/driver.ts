// Node side of one terminal: starts the relay found by the probe (python3 relay.py, or `script`
// with our child), hands it the launch over the control descriptor (argv and env never on a
// command line), and turns its status lines into identity, resize answers and the exit status.
// Data streams are the relay's own sockets, so backpressure is the kernel's on both sides.
import { spawn, type ChildProcess, type StdioOptions } from "node:child_process";
import { constants } from "node:os";
import type { Socket } from "node:net";
import type { Readable, Writable } from "node:stream";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import type { UsableTerminalSupport } from "./terminal-probe.js";
import { scriptArgs } from "./terminal-probe.js";
import { verifiedRelayFile } from "./sources.js";
import { RelayStatus, type RelayControl } from "./relay-messages.js";
import { onJsonLines } from "../../shared/json-lines.js";

export interface TerminalSpec {
  /** Program file passed to execve (already resolved). */
  file: string;
  args: string[];
  /** argv[0] as the program sees it. */
  argv0: string;
  /** Working directory (already validated). */
  cwd: string;
  /** The workload's whole environment: nothing is added (no TERM unless given). */
  env: Record<string, string>;
  rows: number;
  cols: number;
  /** Open descriptor of the exec's tag file: the workload gets it as fd 47, the relay never keeps it. */
  tagFd?: number;
  /**
   * The same tag file's path, for a relay started ahead of its exec (startIdleRelay): the
   * workload's side opens it as fd 47 before the program starts. Without it such a relay is not used.
   */
  tagPath?: string;
}

export interface TerminalExit {
  code: number | null;
  signal: string | null;
}

/**
 * One workload on its own terminal, sized before it starts, leading its own session in the
 * foreground group (python3: pgid = sid = pid; `script`: our child leads the session and the
 * workload is its foreground group). Bytes pass raw both ways.
 */
export interface Terminal {
  readonly method: UsableTerminalSupport["method"];
  /** The relay process (python3 or `script`): never a member of the workspace's process set. */
  readonly relayPid: number;
  /** Identity of the workload; null when it could not be executed (see spawnError). */
  readonly pid: number | null;
  readonly pgid: number | null;
  readonly sid: number | null;
  /** /proc/<pid>/stat field 22, read before the workload could be reaped. */
  readonly startTime: string | null;
  /** Set when execve failed: code 127 (not found) or 126, like a shell; `exited` carries the code. */
  readonly spawnError: { code: number; message: string } | null;
  /** What the terminal shows. Not reading it holds the workload back (its writes block). */
  readonly output: Readable;
  /**
   * Keyboard side. Honour write()'s return value; end() only stops input (a tty has no EOF).
   * `script` (util-linux >= 2.35) queues input its workload does not read without bound, so the
   * writer must bound what it writes to a terminal nobody reads.
   */
  readonly input: Writable;
  /** Applies a size; true once the terminal side reports exactly that size (SIGWINCH sent). */
  resize(rows: number, cols: number): Promise<boolean>;
  /** Sends a signal to the workload's current process group; false when it cannot be delivered. */
  signal(sig: NodeJS.Signals): boolean;
  /** The exact wait status; resolves once every byte of output has been handed to `output`. */
  readonly exited: Promise<TerminalExit>;
  /** Hangs the terminal up (SIGHUP to the session, SIGKILL after 1 s) and waits for the relay. */
  close(): Promise<void>;
}

/** How long the relay has to report the workload started (or failed to). */
const START_TIMEOUT_MS = 10_000;
const RESIZE_TIMEOUT_MS = 5_000;
/** close(): the relay's own hang-up is bounded by ~3 s; past this it is SIGKILLed. */
const CLOSE_TIMEOUT_MS = 6_000;
const STDERR_KEEP = 4096;
/** Status lines are a few numbers and one error text; a longer one is not the relay's. */
const MAX_STATUS_LINE = 1024 * 1024;

const validSize = (n: number) => Number.isInteger(n) && n >= 1 && n <= 65535;

/** Lone surrogates become U+FFFD, as node's own spawn would encode them. */
const wellFormed = (s: string) => Buffer.from(s, "utf8").toString("utf8");

function relayCommand(support: UsableTerminalSupport): [string, string[]] {
  if (support.method === "python3") return [support.python, ["-I", "-S", verifiedRelayFile("python3", support.relay)]];
  return [support.script, scriptArgs(support.node, verifiedRelayFile("script", support.scriptChild))];
}

class RelayTerminal implements Terminal {
  pid: number | null = null;
  pgid: number | null = null;
  sid: number | null = null;
  startTime: string | null = null;
  spawnError: { code: number; message: string } | null = null;
  readonly relayPid: number;
  readonly output: Readable;
  readonly input: Writable;
  readonly exited: Promise<TerminalExit>;
  readonly started: Promise<void>;
  private readonly control: Socket;
  private readonly resizes = new Map<number, (ok: boolean) => void>();
  private nextResize = 1;
  private exit: TerminalExit | null = null;
  private done = false;
  private stderr = "";
  private failure: string | null = null;

  constructor(
    readonly method: UsableTerminalSupport["method"],
    private readonly proc: ChildProcess,
  ) {
    this.relayPid = proc.pid!;
    this.output = proc.stdout!;
    this.input = proc.stdin!;
    this.control = proc.stdio[3] as Socket;
    const status = proc.stdio[4] as Socket;
    // A relay that is gone makes these fail; the outcome is reported through `exited`.
    for (const s of [this.output, this.input, this.control, status, proc.stderr!]) s.on("error", () => undefined);
    proc.stderr!.on("data", (d: Buffer) => (this.stderr = (this.stderr + d.toString("utf8")).slice(-STDERR_KEEP)));

    let onStart: (() => void) | null = null;
    this.started = new Promise<void>((resolve) => (onStart = resolve));
    // A line that is not one of the declared status messages is not ours: skipped.
    onJsonLines(status, { maxLine: MAX_STATUS_LINE, guard: RelayStatus, onInvalid: "skip" }, (msg) => {
      if (msg.type === "spawned") {
        this.pid = msg.pid;
        this.pgid = msg.pgid;
        this.sid = msg.sid;
        this.startTime = msg.startTime;
        onStart!();
      } else if (msg.type === "spawn-failed") {
        this.spawnError = { code: msg.code, message: msg.message };
        onStart!();
      } else if (msg.type === "resized") {
        this.resizes.get(msg.id)?.(msg.ok);
        this.resizes.delete(msg.id);
      } else if (msg.type === "exit") {
        this.exit = { code: msg.code, signal: msg.signal };
      } else if (msg.type === "error") {
        this.failure = msg.message;
      }
    });
    const statusEnded = new Promise<void>((resolve) => status.once("close", resolve));
    const relayExited = new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) resolve();
      else proc.once("exit", () => resolve());
    });
    this.exited = Promise.all([statusEnded, relayExited]).then(() => {
      this.done = true;
      for (const answer of this.resizes.values()) answer(false);
      this.resizes.clear();
      if (this.exit) return this.exit;
      const why = this.failure ?? (oneLine(this.stderr) || `relay exit ${proc.exitCode ?? proc.signalCode}`);
      throw new RuntimeError("remote", `the terminal ended without the workload's exit status (${why})`);
    });
    this.exited.catch(() => undefined);
  }

  send(msg: RelayControl): boolean {
    if (this.done || this.control.writableEnded || this.control.destroyed) return false;
    this.control.write(JSON.stringify(msg) + "\n");
    return true;
  }

  resize(rows: number, cols: number): Promise<boolean> {
    if (!validSize(rows) || !validSize(cols) || this.pid === null) return Promise.resolve(false);
    const id = this.nextResize++;
    if (!this.send({ type: "resize", id, rows, cols })) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.resizes.delete(id);
        resolve(false);
      }, RESIZE_TIMEOUT_MS);
      this.resizes.set(id, (ok) => {
        clearTimeout(timer);
        resolve(ok);
      });
    });
  }

  signal(sig: NodeJS.Signals): boolean {
    if (!(sig in constants.signals) || this.pid === null || this.exit) return false;
    return this.send({ type: "signal", signal: sig });
  }

  async close(): Promise<void> {
    if (!this.control.writableEnded) this.control.end();
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), CLOSE_TIMEOUT_MS);
    await this.exited.catch(() => undefined);
    clearTimeout(timer);
  }
}

/** A relay process started before any exec needs it, waiting for its launch (python3 only). */
export interface IdleRelay {
  readonly support: UsableTerminalSupport;
  /** The relay process (undefined when it could not be started). */
  readonly pid: number | undefined;
  /** Still waiting and usable (not exited, not failed). */
  readonly usable: boolean;
  /** Ends it unused. */
  discard(): void;
}

class WaitingRelay implements IdleRelay {
  private failed: Error | null = null;
  private taken = false;
  readonly proc: ChildProcess;

  constructor(
    readonly support: UsableTerminalSupport,
    readonly command: string,
    args: string[],
  ) {
    this.proc = startRelay(command, args, ["pipe", "pipe", "pipe", "pipe", "pipe"]);
    this.proc.once("error", (err) => (this.failed = err));
    // Until taken nothing reads it; a relay that ended (or failed to start) is simply not used.
    for (const s of this.proc.stdio) (s as Socket | null)?.on("error", () => undefined);
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  get usable(): boolean {
    return (
      !this.taken && this.failed === null && this.proc.pid !== undefined && this.proc.exitCode === null && this.proc.signalCode === null
    );
  }

  take(): ChildProcess {
    this.taken = true;
    return this.proc;
  }

  discard(): void {
    this.taken = true;
    this.proc.kill("SIGKILL");
  }
}

/**
 * Starts a relay ahead of the exec it will serve, so that exec does not wait for the interpreter
 * to start (python3 only; null for other methods). It holds no workload data until launched: its
 * control descriptor carries the launch later, with the tag file's path instead of a descriptor.
 */
export function startIdleRelay(support: UsableTerminalSupport): IdleRelay | null {
  if (support.method !== "python3") return null;
  const [command, args] = relayCommand(support);
  return new WaitingRelay(support, command, args);
}

/** Own session and no inherited environment: the relay is nobody's job and leaks nothing. */
function startRelay(command: string, args: string[], stdio: StdioOptions): ChildProcess {
  return spawn(command, args, { stdio, env: {}, cwd: "/", detached: true });
}

const sameSupport = (a: UsableTerminalSupport, b: UsableTerminalSupport) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Starts `spec` on a new terminal owned by a relay child of this process (`idle`, when given,
 * usable and started for the same support, with `spec.tagPath` set; else a new one). Resolves once
 * the workload runs (identity set) or failed to execute (spawnError set); rejects when the relay
 * itself cannot start or does not report within START_TIMEOUT_MS (then nothing is left running).
 */
export async function spawnTerminal(support: UsableTerminalSupport, spec: TerminalSpec, idle?: IdleRelay): Promise<Terminal> {
  if (!validSize(spec.rows) || !validSize(spec.cols)) throw new RuntimeError("input", "Invalid PTY size");
  const warm =
    idle instanceof WaitingRelay && idle.usable && spec.tagPath !== undefined && sameSupport(idle.support, support) ? idle : null;
  const [command, args] = relayCommand(support);
  let proc: ChildProcess;
  if (warm) {
    proc = warm.take();
  } else {
    const stdio: StdioOptions = ["pipe", "pipe", "pipe", "pipe", "pipe"];
    if (spec.tagFd !== undefined) stdio.push(spec.tagFd);
    proc = startRelay(command, args, stdio);
  }
  const spawnFailed = new Promise<never>((_, reject) =>
    proc.once("error", (err) =>
      reject(new RuntimeError("remote-dependency", `cannot start the terminal relay ${command}: ${err.message}`)),
    ),
  );
  if (proc.pid === undefined) return spawnFailed;
  const term = new RelayTerminal(support.method, proc);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(spec.env)) env[wellFormed(k)] = wellFormed(v);
  term.send({
    type: "launch",
    file: wellFormed(spec.file),
    args: spec.args.map(wellFormed),
    argv0: wellFormed(spec.argv0),
    cwd: wellFormed(spec.cwd),
    env,
    rows: spec.rows,
    cols: spec.cols,
    ...(warm ? { tagPath: wellFormed(spec.tagPath!) } : { tag: spec.tagFd !== undefined }),
    ...(support.method === "script" ? { stty: support.stty } : {}),
  });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RuntimeError("remote", "the terminal relay did not start the workload in time")), START_TIMEOUT_MS);
  });
  const endedEarly = term.exited.then(
    () => Promise.reject(new RuntimeError("remote", "the terminal relay ended before the workload started")),
    (err: unknown) => Promise.reject(err),
  );
  try {
    await Promise.race([term.started, spawnFailed, timedOut, endedEarly]);
  } catch (err) {
    await term.close();
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return term;
}
