// The wrapper's side of a resumable exec conversation (src/shared/stream-replay.ts): numbers and keeps
// the frames it sends until the daemon acknowledges them, numbers what it receives and acknowledges
// it once handed to Paseo, and — when the stream is lost with the link, the broker or its SSH
// connection — re-attaches with `exec.attach {token, received}` (backoff 250 ms → 5 s with
// jitter) through the broker, or a replacement broker, until the reconnect grace runs out. The
// conversation above sees one gapless, duplicate-free stream of frames.
import { EventEmitter } from "node:events";
import { RuntimeError, fromWireError } from "../shared/errors.js";
import { FrameKind, encodeJson, type Frame } from "../shared/frames.js";
import { ReceiveCounter, ReplayLog, isUnnumbered } from "../shared/stream-replay.js";
import { sleep } from "../shared/async.js";
import { randomHex } from "../shared/random.js";
import type { AgentRequest, RuntimeMessage } from "../shared/agent-api.js";
import { agentMessage, type AgentChannel } from "../transport/agent-channel.js";
import { requestFor, type RemoteHost } from "../transport/host.js";

export const RECONNECT_MIN_MS = 250;
export const RECONNECT_MAX_MS = 5000;

/** The next wait before re-attaching: doubling from RECONNECT_MIN_MS up to RECONNECT_MAX_MS, ±25 % jitter. */
export function reconnectDelay(attempt: number): number {
  const base = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** Math.min(attempt, 10));
  return Math.round(base * (0.75 + Math.random() * 0.5));
}

export function newResumeToken(): string {
  return randomHex(16);
}

export interface ExecLinkEvents {
  /** A numbered frame from the daemon, each exactly once and in order; call `processed(seq)` after handling it. */
  frame: [Frame, number];
  /** Stdin bytes the workload took (frees the stdin window). */
  stdinTaken: [number];
  /** The conversation cannot continue: its stream was lost for good. */
  lost: [RuntimeError];
  /** A lost stream was replaced: frames sent from now on go out at once again. */
  reattached: [];
}

export interface ExecLinkOptions {
  /** Null: not resumable (the stream's loss is the exec's loss, as in-process or with a grace of 0). */
  token: string | null;
  graceMs: number;
  /** The host as configured, for messages. */
  hostName: string;
}

export class ExecLink extends EventEmitter<ExecLinkEvents> {
  private readonly up = new ReplayLog();
  private readonly down = new ReceiveCounter();
  private ch: AgentChannel | null;
  private ackScheduled = false;
  private finished = false;
  private ending = false;
  private resumeDropped = false;
  /** Set while re-attaching (the frames sent meanwhile wait in the replay log). */
  reattaching = false;
  /** Re-attachments that succeeded (diagnostics). */
  reattached = 0;
  /** The last attach generation asked for (src/shared/stream-replay.ts): exec.run's conversation is 0. */
  private gen = 0;

  constructor(
    private readonly host: RemoteHost,
    first: AgentChannel,
    private readonly opts: ExecLinkOptions,
  ) {
    super();
    this.ch = first;
    this.watch(first);
  }

  get resumable(): boolean {
    return this.opts.token !== null && !this.resumeDropped && this.opts.graceMs > 0;
  }

  /** The exec runs on sshd's pty, whose channel cannot outlive the link: a loss now ends it. */
  dropResume(): void {
    this.resumeDropped = true;
  }

  /** Bytes of stdin sent and not yet taken by the workload. */
  get stdinUnacked(): number {
    return this.up.weight;
  }

  /** Sends the request (not numbered). */
  start(req: AgentRequest): void {
    this.ch?.sendJson(req);
  }

  /** Sends numbered frames (`stdinBytes`: how many workload bytes they carry). */
  send(frames: Buffer | Buffer[], stdinBytes = 0): void {
    const list = Array.isArray(frames) ? frames : [frames];
    list.forEach((f, i) => {
      this.up.append(f, i === 0 ? stdinBytes : 0);
      if (!this.reattaching) this.ch?.send(f);
    });
  }

  sendJson(msg: RuntimeMessage): void {
    this.send(encodeJson(msg));
  }

  /** Frame `seq` was handed on (to fd1/fd2/fd4, or acted on): acknowledged cumulatively. */
  processed(seq: number): void {
    if (!this.down.complete(seq) || this.ackScheduled) return;
    this.ackScheduled = true;
    setImmediate(() => this.flushAck());
  }

  private flushAck(): void {
    this.ackScheduled = false;
    if (!this.reattaching) this.ch?.sendJson({ type: "ack", seq: this.down.processed });
  }

  /** Ends our side after the exit was handed on (everything processed is acknowledged first). */
  end(): void {
    this.finished = true;
    this.ending = true;
    this.flushAck();
    this.ch?.end();
  }

  /** Gives up the conversation (a failure being reported, or the wrapper exiting). */
  destroy(): void {
    this.finished = true;
    this.ch?.destroy();
  }

  private watch(ch: AgentChannel): void {
    ch.on("frame", (f) => {
      if (this.ch === ch) this.onFrame(f);
    });
    ch.on("close", () => {
      if (this.ch !== ch) return;
      this.ch = null;
      this.onClose();
    });
  }

  private onFrame(f: Frame): void {
    if (isUnnumbered(f)) {
      const msg = agentMessage(f);
      if (msg?.type === "ack") {
        const taken = this.up.ack(msg.seq);
        if (taken > 0) this.emit("stdinTaken", taken);
      }
      return;
    }
    const seq = this.down.next(false);
    if (f.kind === FrameKind.Json) {
      const type = agentMessage(f)?.type;
      if (type === "exit" || type === "error") this.finished = true;
    }
    this.emit("frame", f, seq);
  }

  private onClose(): void {
    if (this.finished || this.ending) return;
    if (!this.resumable) {
      this.finished = true;
      // The broker closes a stream that carries a token without naming the loss (it expects a
      // re-attachment), so an exec that dropped its token names the host and why it cannot resume.
      const message = this.resumeDropped
        ? `connection to ${this.opts.hostName} was lost; a terminal on sshd's pty cannot outlive its SSH connection`
        : "connection to the remote agent was lost";
      this.emit("lost", new RuntimeError("network", message));
      return;
    }
    void this.reattach();
  }

  /** Re-attaches until it works, the daemon says the exec is gone, or the grace runs out. */
  private async reattach(): Promise<void> {
    this.reattaching = true;
    const deadline = Date.now() + this.opts.graceMs;
    let last = "";
    for (let attempt = 0; !this.finished; attempt++) {
      const wait = reconnectDelay(attempt);
      if (Date.now() + wait >= deadline) {
        await sleep(Math.max(0, deadline - Date.now()));
        break;
      }
      await sleep(wait);
      if (this.finished) return;
      const result = await Promise.race([
        this.tryAttach(deadline),
        sleep(Math.max(0, deadline - Date.now())).then(() => "expired" as const),
      ]);
      if (result === "expired") break;
      if (this.finished) {
        // Given up meanwhile (the conversation is failing): a late attachment is let go again.
        if (typeof result === "object" && !(result instanceof RuntimeError)) result.ch.destroy();
        return;
      }
      if (result instanceof RuntimeError) {
        this.finished = true;
        this.emit("lost", result);
        return;
      }
      if (typeof result !== "string") {
        this.reattaching = false;
        this.reattached++;
        this.ch = result.ch;
        this.watch(result.ch);
        for (const f of this.up.after(result.received) ?? []) result.ch.send(f);
        this.flushAck();
        for (const f of result.early) this.onFrame(f);
        this.emit("reattached");
        return;
      }
      last = result;
    }
    if (this.finished) return;
    this.finished = true;
    this.emit(
      "lost",
      new RuntimeError(
        "network",
        `connection to ${this.opts.hostName} was lost and not re-established within reconnectGraceMs (${this.opts.graceMs} ms); the execution was stopped on the host${last ? ` (last attempt: ${last})` : ""}`,
      ),
    );
  }

  /**
   * One attach attempt: the new channel and what the daemon holds, a fatal error (the daemon does
   * not know the exec any more; a host key or credentials that changed), or why it did not work.
   */
  private async tryAttach(deadline: number): Promise<{ ch: AgentChannel; received: number; early: Frame[] } | RuntimeError | string> {
    // Every attempt is a new generation, so an abandon a broker issues for an earlier one (it saw
    // that conversation's client go) can never reap the exec this attempt is re-attaching to.
    const gen = ++this.gen;
    let ch: AgentChannel;
    try {
      ch = await this.host.openAgent({ session: this.opts.token!, reattach: true, gen, waitUntil: deadline });
    } catch (err) {
      if (err instanceof RuntimeError && FATAL.has(err.errorClass)) return err;
      return err instanceof Error ? err.message : String(err);
    }
    return new Promise((resolve) => {
      const early: Frame[] = [];
      let answered = false;
      const onFrame = (f: Frame) => {
        if (answered) {
          early.push(f);
          return;
        }
        const msg = agentMessage(f);
        if (msg?.type === "attached") {
          answered = true;
          // Frames behind `attached` in the same chunk are kept for the conversation, in order.
          queueMicrotask(() => {
            ch.off("frame", onFrame);
            ch.off("close", onClose);
            resolve({ ch, received: msg.received, early });
          });
        } else if (msg?.type === "error") {
          answered = true;
          ch.destroy();
          const err = fromWireError(msg);
          if (err.errorClass === "remote")
            resolve(new RuntimeError("remote", `the execution on ${this.opts.hostName} could not be resumed: ${err.message}`));
          else resolve(FATAL.has(err.errorClass) ? err : err.message);
        }
      };
      const onClose = () => {
        if (!answered) resolve("the channel closed before the host daemon answered");
      };
      ch.on("frame", onFrame);
      ch.on("close", onClose);
      ch.sendJson(requestFor(this.host, "exec.attach", { token: this.opts.token!, received: this.down.received, gen }));
    });
  }
}

/** Failures re-attaching cannot fix. */
const FATAL = new Set(["auth", "host-key", "ownership", "input"]);
