// The wrapper's side of a resumable exec conversation (src/shared/stream-replay.ts, the frames and
// generations of src/shared/exec-session-core.ts): numbers and keeps
// the frames it sends until the daemon acknowledges them, numbers what it receives and acknowledges
// it once handed to Paseo, and — when the stream is lost with the link, the broker or its SSH
// connection — re-attaches with `exec.attach {token, received}` through the broker, or a
// replacement broker, as long as the rules allow (reattach-rules.ts: lifecycle, backoff, grace,
// generations, fatal failures). The conversation above sees one gapless, duplicate-free stream of frames.
import { EventEmitter } from "node:events";
import { RuntimeError, fromWireError } from "../shared/errors.js";
import { FrameKind, encodeJson, type Frame } from "../shared/frames.js";
import { ReceiveCounter, ReplayLog } from "../shared/stream-replay.js";
import { decodeConversationFrame } from "../shared/exec-session-core.js";
import { sleep } from "../shared/async.js";
import type { AgentRequest, RuntimeMessage } from "../shared/agent-api.js";
import { agentMessage, type AgentChannel } from "../transport/agent-channel.js";
import { requestFor, type RemoteHost } from "../transport/host.js";
import {
  attachRefusal,
  currentChannel,
  graceExpiredError,
  isFatalAttachFailure,
  lostError,
  silentAtStartError,
  nextAttemptDelay,
  nextExecLinkState,
  resumeRight,
  stillReattaching,
  type ExecLinkEvent,
  type ExecLinkState,
  type ResumeRight,
} from "./reattach-rules.js";

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
  /**
   * A pool's exec: its first stream lost before the daemon sent anything ends the exec with a
   * network error instead of re-attaching (the host went silent as the exec started, so nothing is
   * known to run there, and the pool's rule is to fail fast with its host down).
   */
  failFastUntilHeard?: boolean;
}

type Attachment = { ch: AgentChannel; received: number; early: Frame[] };

export class ExecLink extends EventEmitter<ExecLinkEvents> {
  private readonly up = new ReplayLog();
  private readonly down = new ReceiveCounter();
  private state: ExecLinkState;
  private right: ResumeRight;
  private ackPending: NodeJS.Immediate | null = null;
  /** Whether the daemon sent anything yet (failFastUntilHeard). */
  private heard = false;
  /** Re-attachments that succeeded (diagnostics). */
  reattached = 0;

  constructor(
    private readonly host: RemoteHost,
    first: AgentChannel,
    private readonly opts: ExecLinkOptions,
  ) {
    super();
    this.right = resumeRight(opts.token, opts.graceMs);
    this.state = { kind: "attached", ch: first, gen: 0 };
    this.watch(first);
  }

  private to(e: ExecLinkEvent): ExecLinkState {
    this.state = nextExecLinkState(this.state, e);
    return this.state;
  }

  get resumable(): boolean {
    return this.right.kind === "resumable";
  }

  /** Set while re-attaching (the frames sent meanwhile wait in the replay log). */
  get reattaching(): boolean {
    return stillReattaching(this.state);
  }

  /** The exec runs on sshd's pty, whose channel cannot outlive the link: a loss now ends it. */
  dropResume(): void {
    this.right = { kind: "dropped" };
  }

  /** Bytes of stdin sent and not yet taken by the workload. */
  get stdinUnacked(): number {
    return this.up.weight;
  }

  /** Sends the request (not numbered). */
  start(req: AgentRequest): void {
    currentChannel(this.state)?.sendJson(req);
  }

  /** Sends numbered frames (`stdinBytes`: how many workload bytes they carry); while re-attaching they wait in the replay log. */
  send(frames: Buffer | Buffer[], stdinBytes = 0): void {
    const list = Array.isArray(frames) ? frames : [frames];
    list.forEach((f, i) => {
      this.up.append(f, i === 0 ? stdinBytes : 0);
      currentChannel(this.state)?.send(f);
    });
  }

  sendJson(msg: RuntimeMessage): void {
    this.send(encodeJson(msg));
  }

  /** Frame `seq` was handed on (to fd1/fd2/fd4, or acted on): acknowledged cumulatively. */
  processed(seq: number): void {
    if (!this.down.complete(seq) || this.ackPending) return;
    this.ackPending = setImmediate(() => this.flushAck());
  }

  private flushAck(): void {
    clearImmediate(this.ackPending ?? undefined);
    this.ackPending = null;
    currentChannel(this.state)?.sendJson({ type: "ack", seq: this.down.processed });
  }

  /** Ends our side after the exit was handed on (everything processed is acknowledged first). */
  end(): void {
    this.to({ type: "end" });
    this.flushAck();
    currentChannel(this.state)?.end();
  }

  /** Gives up the conversation (a failure being reported, or the wrapper exiting). */
  destroy(): void {
    const ch = currentChannel(this.state);
    this.to({ type: "destroy" });
    ch?.destroy();
  }

  private watch(ch: AgentChannel): void {
    ch.on("frame", (f) => {
      if (currentChannel(this.state) === ch) this.onFrame(f);
    });
    ch.on("close", () => {
      if (currentChannel(this.state) !== ch) return;
      this.onClose();
    });
  }

  private onFrame(f: Frame): void {
    this.heard = true;
    const c = decodeConversationFrame(f);
    if (c.kind === "ack") {
      const taken = this.up.ack(c.seq);
      if (taken > 0) this.emit("stdinTaken", taken);
    }
    if (c.kind !== "numbered") return;
    const seq = this.down.next(false);
    if (f.kind === FrameKind.Json) {
      const type = agentMessage(f)?.type;
      if ((type === "exit" || type === "error") && this.state.kind !== "ending") this.to({ type: "final-frame" });
    }
    this.emit("frame", f, seq);
  }

  private onClose(): void {
    const silentAtStart = this.opts.failFastUntilHeard === true && !this.heard;
    const s = this.to({ type: "stream-closed", resumable: this.resumable && !silentAtStart, now: Date.now() });
    if (s.kind === "reattaching") void this.reattach(s.since + this.opts.graceMs);
    else if (s.kind === "finished" && s.why === "lost")
      this.emit("lost", silentAtStart ? silentAtStartError(this.opts.hostName) : lostError(this.right, this.opts.hostName));
  }

  /** Re-attaches until it works, the daemon says the exec is gone, or the grace (until `deadline`) runs out. */
  private async reattach(deadline: number): Promise<void> {
    let last = "";
    for (let attempt = 0; this.reattaching; attempt++) {
      const wait = nextAttemptDelay(attempt, deadline, Date.now());
      if (wait === null) {
        await sleep(Math.max(0, deadline - Date.now()));
        break;
      }
      await sleep(wait);
      if (!this.reattaching) return;
      const result = await Promise.race([
        this.tryAttach(deadline),
        sleep(Math.max(0, deadline - Date.now())).then(() => "expired" as const),
      ]);
      if (result === "expired") break;
      if (!this.reattaching) {
        // Given up meanwhile (the conversation is failing): a late attachment is let go again.
        if (typeof result === "object" && !(result instanceof RuntimeError)) result.ch.destroy();
        return;
      }
      if (result instanceof RuntimeError) {
        this.to({ type: "gave-up" });
        this.emit("lost", result);
        return;
      }
      if (typeof result !== "string") {
        this.resumeOn(result);
        return;
      }
      last = result;
    }
    if (!this.reattaching) return;
    this.to({ type: "gave-up" });
    this.emit("lost", graceExpiredError(this.opts.hostName, this.opts.graceMs, last));
  }

  /** The conversation continues on `a.ch`: replay what the daemon lacks, then what came behind `attached`. */
  private resumeOn(a: Attachment): void {
    this.to({ type: "reattached", ch: a.ch });
    this.reattached++;
    this.watch(a.ch);
    for (const f of this.up.after(a.received) ?? []) a.ch.send(f);
    this.flushAck();
    for (const f of a.early) this.onFrame(f);
    this.emit("reattached");
  }

  /**
   * One attach attempt (under a new generation): the new channel and what the daemon holds, a
   * fatal error (the daemon does not know the exec any more; a host key or credentials that
   * changed), or why it did not work.
   */
  private async tryAttach(deadline: number): Promise<Attachment | RuntimeError | string> {
    const s = this.to({ type: "attempt" });
    const gen = s.kind === "reattaching" ? s.gen : 0;
    const token = this.opts.token!;
    let ch: AgentChannel;
    try {
      ch = await this.host.openAgent({ session: token, reattach: true, gen, waitUntil: deadline });
    } catch (err) {
      if (isFatalAttachFailure(err)) return err;
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
          resolve(attachRefusal(fromWireError(msg), this.opts.hostName));
        }
      };
      const onClose = () => {
        if (!answered) resolve("the channel closed before the host daemon answered");
      };
      ch.on("frame", onFrame);
      ch.on("close", onClose);
      ch.sendJson(requestFor(this.host, "exec.attach", { token, received: this.down.received, gen }));
    });
  }
}
