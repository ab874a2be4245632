// The `exec` wrapper (docs/contract.md#exec): Paseo's fd0–fd4 on this side, one agent conversation (and, for
// PTY, one SSH pty channel) on the other.
//
//  * Refusals (invalid envelope, not ready, bad cwd, reused exec id, unreachable host) throw before
//    any fd4 event, so the dispatcher prints one stderr line and exits non-zero.
//  * `started` is written only when the agent says the identity is on disk (signalable).
//  * `eof` follows the workload's exit once everything it wrote has been handed to fd1/fd2 (PTY:
//    once the pty channel closed, bounded); then `exit` with the agent's real wait status, and our
//    own exit status mirrors it.
//  * PTY controls (resize, signal) are processed after `started`, one resize at a time: applied
//    with an SSH window-change, confirmed on the remote terminal, then acknowledged.
//  * Any failure after `started` kills the execution first and then writes one fd4 `error`.
import type { Readable, Writable } from "node:stream";
import { RuntimeError, fromWireError } from "../shared/errors.js";
import { FrameKind, encodeData, encodeFrame, type Frame } from "../shared/frames.js";
import { isExecSignal } from "../shared/agent-api.js";
import { agentMessage, type AgentChannel } from "../transport/agent-channel.js";
import { requestFor, type PtyChannel, type RemoteHost } from "../transport/host.js";
import { parseRuntimeOptions, type RuntimeOptions } from "../transport/options.js";
import { readControls, type ControlFrame, type SpawnEnvelope } from "./controls.js";
import { EventWriter } from "./events.js";
import { flushed, openControlIn, openEventsOut } from "./fds.js";
import { WrapperSignals, mirrorExit } from "./wrapper-signals.js";

/** After a PTY workload exited: how long to wait for the pty channel to deliver its last output. */
export const PTY_DRAIN_MS = 2000;
/** How long a kill requested before an `error` event may take to be confirmed by the agent. */
export const KILL_CONFIRM_MS = 2000;
/** Workload stdin sent to the agent but not yet taken by the workload; above this fd0 is not read. */
export const STDIN_WINDOW = 4 * 1024 * 1024;

type Outcome = { kind: "exit"; code: number | null; signal: string | null } | { kind: "error"; err: RuntimeError };

/** Paseo's fd0-fd2 as the wrapper sees them (the CLI passes its process streams). */
export interface ExecStreams {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
}

export interface ExecDeps {
  openHost(options: RuntimeOptions): Promise<RemoteHost>;
  fds?: { control: Readable; events: Writable };
}

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export async function runExec(workspaceId: string, io: ExecStreams, deps: ExecDeps): Promise<number> {
  const signals = new WrapperSignals();
  const controls = readControls(deps.fds?.control ?? openControlIn());
  const events = new EventWriter(deps.fds?.events ?? openEventsOut());
  try {
    const envelope = await controls.envelope;
    const options = parseRuntimeOptions(envelope.options);
    const host = await deps.openHost(options);
    try {
      const ch = await host.openAgent();
      return await new Conversation(workspaceId, envelope, host, ch, io, events, signals, controls).run();
    } finally {
      host.close();
    }
  } finally {
    signals.detach();
    controls.close();
  }
}

class Conversation {
  private readonly outcome = deferred<Outcome>();
  private readonly exited = deferred<Outcome>();
  private pty: PtyChannel | null = null;
  private ptyForwarding = false;
  private ptyStdin: Buffer[] = [];
  private readonly pendingControls: ControlFrame[] = [];
  private readonly resizes: Array<{ id: number; rows: number; cols: number }> = [];
  private resizeInFlight: number | null = null;
  private failing = false;
  private ackPending = 0;
  private stdinUnacked = 0;
  private pendingError: string | null = null;
  private ackScheduled = false;

  constructor(
    private readonly workspaceId: string,
    private readonly envelope: SpawnEnvelope,
    private readonly host: RemoteHost,
    private readonly ch: AgentChannel,
    private readonly io: ExecStreams,
    private readonly events: EventWriter,
    private readonly signals: WrapperSignals,
    private readonly controls: ReturnType<typeof readControls>,
  ) {}

  private get isPty(): boolean {
    return this.envelope.stdio.kind === "pty";
  }

  async run(): Promise<number> {
    const e = this.envelope;
    this.io.stdout.on("error", () => undefined);
    this.io.stderr.on("error", () => undefined);
    this.ch.on("frame", (f) => this.onFrame(f));
    this.ch.on("close", () => this.settle({ kind: "error", err: new RuntimeError("network", "connection to the remote agent was lost") }));
    this.ch.sendJson(
      requestFor(this.host, "exec.run", {
        workspaceId: this.workspaceId,
        owner: e.runtimeInstanceId,
        execId: e.execId,
        argv: e.argv,
        env: e.env,
        ...(e.cwd !== undefined ? { cwd: e.cwd } : {}),
        stdio: e.stdio,
      }),
    );
    this.pumpStdin();
    this.controls.onControl((c) => {
      if (c.end) return; // PTY control EOF (pipes: right after the envelope); not an error
      // A bad control before `started` is acted on once the exec exists (kill first, then error).
      if (c.error && !this.events.started) this.pendingError = c.error.message;
      else if (c.error) void this.fail(c.error.message);
      else if (c.frame) this.onControl(c.frame);
    });

    const result = await this.outcome.promise;
    if (result.kind === "error") {
      if (!this.events.started) throw result.err; // refusal: one stderr line, no fd4 event
      this.io.stderr.write(`${result.err.message}\n`);
      await this.events.error(result.err.message);
      this.ch.destroy();
      return 1;
    }
    if (!this.events.started) this.events.startedEvent();
    if (this.pty) await Promise.race([this.pty.closed, sleep(PTY_DRAIN_MS)]);
    await Promise.all([flushed(this.io.stdout), flushed(this.io.stderr)]);
    this.signals.detach();
    await this.events.exit(result.code, result.signal);
    this.ch.end();
    this.pty?.destroy();
    return mirrorExit(result.code, result.signal);
  }

  /** Output flow control: tells the agent how many bytes reached fd1/fd2 (see OUTPUT_WINDOW). */
  private acknowledge(bytes: number): void {
    this.ackPending += bytes;
    if (this.ackScheduled) return;
    this.ackScheduled = true;
    setImmediate(() => {
      this.ackScheduled = false;
      const n = this.ackPending;
      this.ackPending = 0;
      if (n > 0 && !this.ch.closed) this.ch.sendJson({ type: "ack", bytes: n });
    });
  }

  private settle(o: Outcome): void {
    if (o.kind === "exit") this.exited.resolve(o);
    // While failing, the exit we provoked (or the channel closing after it) is not the result:
    // the pending `error` is. Either way the kill has been settled.
    if (this.failing) {
      this.exited.resolve(o);
      return;
    }
    this.outcome.resolve(o);
  }

  private onFrame(f: Frame): void {
    switch (f.kind) {
      case FrameKind.Stdout:
      case FrameKind.Stderr: {
        const n = f.payload.length;
        (f.kind === FrameKind.Stdout ? this.io.stdout : this.io.stderr).write(f.payload, () => this.acknowledge(n));
        return;
      }
      case FrameKind.Json:
        break;
      default:
        return;
    }
    const msg = agentMessage(f);
    switch (msg?.type) {
      case "pty-token":
        void this.attachPty(msg.token);
        break;
      case "started":
        this.onStarted();
        break;
      case "stdin-ack":
        this.stdinUnacked -= msg.bytes;
        if (this.stdinUnacked <= STDIN_WINDOW && this.io.stdin.isPaused()) this.io.stdin.resume();
        break;
      case "resized":
        this.onResized(msg.id, msg.ok);
        break;
      case "exit":
        this.settle({ kind: "exit", code: msg.code, signal: msg.signal });
        break;
      case "error":
        this.settle({ kind: "error", err: fromWireError(msg) });
        break;
      case undefined:
        this.settle({ kind: "error", err: new RuntimeError("remote", "remote agent sent a malformed message") });
        break;
    }
  }

  /**
   * Terminal output goes to fd1 only after fd4 `started`, so Paseo never sees workload bytes of an
   * exec it cannot signal yet; until then the stream holds them (bounded by the SSH window).
   */
  private forwardPtyOutput(): void {
    const pty = this.pty;
    if (!pty || this.ptyForwarding) return;
    this.ptyForwarding = true;
    pty.output.on("data", (d: Buffer) => {
      if (!this.io.stdout.write(d)) {
        pty.output.pause();
        this.io.stdout.once("drain", () => pty.output.resume());
      }
    });
  }

  private onStarted(): void {
    if (this.events.started) return;
    this.events.startedEvent();
    this.forwardPtyOutput();
    this.signals.attach((signal) => this.ch.sendJson({ type: "signal", signal }));
    for (const c of this.pendingControls.splice(0)) this.onControl(c);
    if (this.pendingError !== null) void this.fail(this.pendingError);
  }

  private async attachPty(token: string): Promise<void> {
    const stdio = this.envelope.stdio;
    if (stdio.kind !== "pty") return;
    try {
      const pty = await this.host.openPty(["pty-attach", token], {
        rows: stdio.rows,
        cols: stdio.cols,
        ...(stdio.term ? { term: stdio.term } : {}),
      });
      this.pty = pty;
      if (this.events.started) this.forwardPtyOutput();
      pty.stdin.on("error", () => undefined);
      for (const d of this.ptyStdin.splice(0)) pty.stdin.write(d);
    } catch (err) {
      this.ch.destroy();
      this.settle({ kind: "error", err: err instanceof RuntimeError ? err : new RuntimeError("network", String(err)) });
    }
  }

  /** fd0 → workload stdin (pipes: frames, EOF propagated; PTY: terminal input). */
  private pumpStdin(): void {
    const stdin = this.io.stdin;
    stdin.on("data", (d: Buffer) => {
      if (!this.isPty) {
        this.ch.send(encodeData(FrameKind.Stdin, d));
        this.stdinUnacked += d.length;
        if (this.stdinUnacked > STDIN_WINDOW) stdin.pause();
      } else if (this.pty) this.pty.stdin.write(d);
      else this.ptyStdin.push(d);
    });
    // A terminal has no end of input: fd0 EOF in PTY mode only means Paseo is done writing.
    stdin.on("end", () => {
      if (!this.isPty) this.ch.send(encodeFrame(FrameKind.Eof, Buffer.from([0])));
    });
    stdin.on("error", () => undefined);
  }

  private onControl(frame: ControlFrame): void {
    if (this.events.done || this.failing) return;
    if (!this.events.started) {
      this.pendingControls.push(frame);
      return;
    }
    if (frame.type === "spawn") {
      void this.fail("a second spawn envelope arrived on fd3");
    } else if (frame.type === "signal") {
      if (isExecSignal(frame.signal)) this.ch.sendJson({ type: "signal", signal: frame.signal });
      else void this.fail(`Unsupported signal: ${frame.signal}`);
    } else if (!this.isPty) {
      void this.fail("resize control in pipes mode");
    } else {
      this.resizes.push({ id: frame.id, rows: frame.rows, cols: frame.cols });
      this.nextResize();
    }
  }

  private nextResize(): void {
    if (this.resizeInFlight !== null || !this.pty) return;
    const r = this.resizes.shift();
    if (!r) return;
    this.resizeInFlight = r.id;
    this.pty.setWindow(r.rows, r.cols);
    this.ch.sendJson({ type: "resize", id: r.id, rows: r.rows, cols: r.cols });
  }

  private onResized(id: number, ok: boolean): void {
    if (id !== this.resizeInFlight) return;
    this.resizeInFlight = null;
    if (this.events.done || this.failing) return;
    if (!ok) {
      void this.fail("PTY resize was not applied by the remote terminal");
      return;
    }
    // The exit may already be known; `resized` after `eof` would be fatal, so it cannot follow.
    this.events.resized(id);
    this.nextResize();
  }

  /** Kills the execution first (bounded wait for its exit), then fails with an fd4 `error`. */
  private async fail(message: string): Promise<void> {
    if (this.failing) return;
    this.failing = true;
    if (this.events.started) {
      this.ch.sendJson({ type: "signal", signal: "SIGKILL" });
      await Promise.race([this.exited.promise, sleep(KILL_CONFIRM_MS)]);
    }
    this.outcome.resolve({ kind: "error", err: new RuntimeError("remote", message) });
  }
}
