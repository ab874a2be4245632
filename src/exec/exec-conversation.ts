// What both stdio modes of one exec conversation share: the request to the agent, fd4 events in
// order, `started` only once the agent says the identity is on disk, controls held until then,
// wrapper signals forwarded after it, and failure after `started` as "kill first, then one fd4
// `error`". The pipes and PTY subclasses add how workload bytes and resizes travel.
import type { Readable, Writable } from "node:stream";
import { RuntimeError, fromWireError } from "../shared/errors.js";
import { FrameKind, type Frame } from "../shared/frames.js";
import { deferred, sleep } from "../shared/async.js";
import { isExecSignal, type ExecAgentMessage } from "../shared/agent-api.js";
import { agentMessage } from "../transport/agent-channel.js";
import { requestFor, type RemoteHost } from "../transport/host.js";
import type { ControlFrame, ControlReader, SpawnEnvelope } from "./controls.js";
import type { EventWriter } from "./events.js";
import { flushed } from "./fds.js";
import { mirrorExit, type WrapperSignals } from "./wrapper-signals.js";
import type { ExecLink } from "./exec-link.js";

/** How long a kill requested before an `error` event may take to be confirmed by the agent. */
export const KILL_CONFIRM_MS = 2000;

type Outcome = { kind: "exit"; code: number | null; signal: string | null } | { kind: "error"; err: RuntimeError };
export type ResizeControl = Extract<ControlFrame, { type: "resize" }>;

/** Paseo's fd0-fd2 as the wrapper sees them (the CLI passes its process streams). */
export interface ExecStreams {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
}

/** Everything one conversation works with, set up by runExec. */
export interface ConversationParts {
  workspaceId: string;
  envelope: SpawnEnvelope;
  host: RemoteHost;
  /** The exec's conversation (resumable across link losses when it has a token). */
  link: ExecLink;
  io: ExecStreams;
  events: EventWriter;
  signals: WrapperSignals;
  controls: ControlReader;
  /** Sent with exec.run when the exec may re-attach after a lost link. */
  resume?: { token: string; graceMs: number };
}

export abstract class Conversation {
  private readonly outcome = deferred<Outcome>();
  private readonly exited = deferred<Outcome>();
  private readonly pendingControls: ControlFrame[] = [];
  private pendingError: string | null = null;
  /** Set once a failure is being reported: no more controls are acted on. */
  protected failing = false;
  protected readonly ch: ExecLink;
  protected readonly io: ExecStreams;
  protected readonly events: EventWriter;

  constructor(protected readonly parts: ConversationParts) {
    this.ch = parts.link;
    this.io = parts.io;
    this.events = parts.events;
  }

  /** fd0 → the workload. */
  protected abstract pumpStdin(): void;
  /** An exec message only this mode handles (pty-token, resized). */
  protected abstract onModeMessage(msg: ExecAgentMessage): void;
  /** An fd3 resize after `started`. */
  protected abstract onResize(r: ResizeControl): void;
  /** Right after fd4 `started`. */
  protected afterStarted(): void {}
  /** After the workload exited, before `eof`: wait for output still in transit (bounded). */
  protected async drainOutput(): Promise<void> {}
  /** After `exit`: release what the mode opened. */
  protected release(): void {}

  async run(): Promise<number> {
    const e = this.parts.envelope;
    this.io.stdout.on("error", () => undefined);
    this.io.stderr.on("error", () => undefined);
    this.ch.on("frame", (f, seq) => {
      this.onFrame(f, seq);
    });
    this.ch.on("lost", (err) => this.settle({ kind: "error", err }));
    this.ch.start(
      requestFor(this.parts.host, "exec.run", {
        workspaceId: this.parts.workspaceId,
        owner: e.runtimeInstanceId,
        execId: e.execId,
        argv: e.argv,
        env: e.env,
        ...(e.cwd !== undefined ? { cwd: e.cwd } : {}),
        stdio: e.stdio,
        ...(this.parts.resume ? { resume: this.parts.resume } : {}),
      }),
    );
    this.pumpStdin();
    this.parts.controls.onControl((c) => {
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
    await this.drainOutput();
    await Promise.all([flushed(this.io.stdout), flushed(this.io.stderr)]);
    this.parts.signals.detach();
    await this.events.exit(result.code, result.signal);
    this.ch.end();
    this.release();
    return mirrorExit(result.code, result.signal);
  }

  protected settle(o: Outcome): void {
    if (o.kind === "exit") this.exited.resolve(o);
    // While failing, the exit we provoked (or the channel closing after it) is not the result:
    // the pending `error` is. Either way the kill has been settled.
    if (this.failing) {
      this.exited.resolve(o);
      return;
    }
    this.outcome.resolve(o);
  }

  /**
   * One numbered frame of the daemon, each exactly once and in order. Output is acknowledged once
   * fd1/fd2 took it (so a slow reader on Paseo's side holds the workload back, see OUTPUT_WINDOW),
   * everything else once acted on (fd4 events written).
   */
  private onFrame(f: Frame, seq: number): void {
    switch (f.kind) {
      case FrameKind.Stdout:
      case FrameKind.Stderr:
        (f.kind === FrameKind.Stdout ? this.io.stdout : this.io.stderr).write(f.payload, () => this.ch.processed(seq));
        return;
      case FrameKind.Json:
        break;
      default:
        this.ch.processed(seq);
        return;
    }
    this.onMessage(f);
    this.ch.processed(seq);
  }

  private onMessage(f: Frame): void {
    const msg = agentMessage(f);
    switch (msg?.type) {
      case "started":
        this.onStarted();
        break;
      case "exit":
        this.settle({ kind: "exit", code: msg.code, signal: msg.signal });
        break;
      case "error":
        this.settle({ kind: "error", err: fromWireError(msg) });
        break;
      case "ack":
      case "attached":
        break; // handled by the link; never numbered
      case "pty-token":
      case "resized":
        this.onModeMessage(msg);
        break;
      case undefined:
        this.settle({ kind: "error", err: new RuntimeError("remote", "remote agent sent a malformed message") });
        break;
    }
  }

  private onStarted(): void {
    if (this.events.started) return;
    this.events.startedEvent();
    this.afterStarted();
    this.parts.signals.attach((signal) => this.ch.sendJson({ type: "signal", signal }));
    for (const c of this.pendingControls.splice(0)) this.onControl(c);
    if (this.pendingError !== null) void this.fail(this.pendingError);
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
    } else {
      this.onResize(frame);
    }
  }

  /** Kills the execution first (bounded wait for its exit), then fails with an fd4 `error`. */
  protected async fail(message: string): Promise<void> {
    if (this.failing) return;
    this.failing = true;
    if (this.events.started) {
      this.ch.sendJson({ type: "signal", signal: "SIGKILL" });
      await Promise.race([this.exited.promise, sleep(KILL_CONFIRM_MS)]);
    }
    this.outcome.resolve({ kind: "error", err: new RuntimeError("remote", message) });
  }
}
