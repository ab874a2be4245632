// One exec as the daemon keeps it across streams: the exec's op code talks to an ExecContext that
// outlives the conversation it started on. Down frames are numbered and kept until the wrapper
// acknowledges them; up frames are numbered and acknowledged once the op processed them
// (src/shared/stream-replay.ts). When to detach, re-attach, expire or reap is decided by the
// session machine in src/shared/exec-session-core.ts (stepSession); this file is its shell: it
// feeds it the streams' events and performs its actions (grace timer, releasing a stream, telling
// the op of the loss, the token registry).
import { RuntimeError } from "../../shared/errors.js";
import { FrameKind, encodeJson, type Frame } from "../../shared/frames.js";
import { ReceiveCounter, ReplayLog } from "../../shared/stream-replay.js";
import {
  MAX_GRACE_MS,
  decodeConversationFrame,
  newSession,
  stepSession,
  type ConversationEnd,
  type SessionEvent,
  type SessionModel,
} from "../../shared/exec-session-core.js";
import type { AgentMessage, ExecRunRequest } from "../../shared/agent-api.js";
import type { AgentContext } from "../context.js";

/** What an exec's op code sees: the conversation, plus the resume layer's flow hooks. */
export interface ExecContext extends AgentContext {
  /** The oldest Stdin frame not yet taken was taken by the workload (or dropped: its stdin is closed). */
  inputTaken(): void;
  /** Output bytes (Stdout/Stderr payloads) the wrapper has handed to Paseo. */
  onOutputAcked(listener: (bytes: number) => void): void;
  /** The exec cannot outlive its stream (sshd's pty): a lost link ends it, as without a token. */
  dropResume(): void;
}

/** Resumable sessions of this daemon by token (a one-shot agent has none that outlive it). */
const byToken = new Map<string, ExecSession>();
/** Where detach/attach/expiry are noted (the host daemon's log; nowhere in a one-shot agent). Never the token. */
let note: (line: string) => void = () => undefined;

export function setSessionLog(log: (line: string) => void): void {
  note = log;
}

export function findSession(token: string): ExecSession | undefined {
  return byToken.get(token);
}

/** An attached conversation and how its handler learns it was let go. */
interface Attachment {
  ctx: AgentContext;
  release(): void;
}

export class ExecSession {
  private readonly down = new ReplayLog();
  private readonly up = new ReceiveCounter();
  private readonly stdinPending: number[] = [];
  /** Where the session is, and the rules it follows: stepSession in src/shared/exec-session-core.ts. */
  private model: SessionModel<Attachment>;
  private readonly frameListeners: Array<(f: Frame) => void> = [];
  /** Up frames that arrived before the op listened. */
  private readonly early: Frame[] = [];
  private readonly closeListeners: Array<(how: ConversationEnd) => void> = [];
  private readonly ackListeners: Array<(bytes: number) => void> = [];
  private graceTimer: NodeJS.Timeout | undefined;
  private ackScheduled = false;
  private resolveDone!: () => void;
  /** Settles once nobody can need this session any more (final frame acked, or the exec was lost). */
  readonly done: Promise<void> = new Promise((r) => (this.resolveDone = r));
  readonly context: ExecContext;

  constructor(
    first: AgentContext,
    /** Present: the session may be detached and re-attached for `graceMs`. */
    private resume: { token: string; graceMs: number } | null,
  ) {
    this.context = {
      ...first,
      sendJson: (m: AgentMessage) => this.sendDown(encodeJson(m), 0, m.type === "exit" || m.type === "error"),
      sendRaw: (buf) => this.sendDown(buf, buf[0] === FrameKind.Stdout || buf[0] === FrameKind.Stderr ? buf.length - 5 : 0, false),
      drained: () => this.current?.ctx.drained() ?? Promise.resolve(),
      onFrame: (l) => {
        this.frameListeners.push(l);
        for (const f of this.early.splice(0)) l(f);
      },
      pauseInput: () => this.current?.ctx.pauseInput(),
      resumeInput: () => this.current?.ctx.resumeInput(),
      onClose: (l) => {
        const s = this.model.state;
        if (s.kind === "closed" && s.lost !== null) l(s.lost);
        else this.closeListeners.push(l);
      },
      inputTaken: () => {
        const seq = this.stdinPending.shift();
        if (seq !== undefined && this.up.complete(seq)) this.scheduleAck();
      },
      onOutputAcked: (l) => this.ackListeners.push(l),
      dropResume: () => this.dropResume(),
    };
    const { att } = this.attachment(first);
    this.model = newSession(att, resume);
    this.listen(att);
  }

  get resumable(): boolean {
    return this.model.graceMs !== null;
  }

  private get current(): Attachment | null {
    return this.model.state.kind === "attached" ? this.model.state.att : null;
  }

  private get isDone(): boolean {
    return this.model.state.kind === "closed";
  }

  /** Makes the session findable by its token (once the exec exists). */
  register(): void {
    if (this.resume && !this.isDone) byToken.set(this.resume.token, this);
  }

  /**
   * Takes the session over for the conversation of an `exec.attach` (the previous one, if the
   * daemon still thinks it alive, is let go), replays what the wrapper lacks, and resolves when
   * this conversation is let go in turn. `gen` counts, even when the attach fails: the wrapper
   * that asked is alive at that generation.
   */
  attach(ctx: AgentContext, received: number, gen: number): Promise<void> {
    this.apply({ type: "attach-asked", gen });
    const replay = this.down.after(received);
    if (replay === null || received > this.down.sent) {
      throw new RuntimeError(
        "remote",
        `exec.attach: the wrapper holds frame ${received}, the host daemon kept ${this.down.acked}-${this.down.sent}`,
        { code: "replay-gap" },
      );
    }
    const { att, released } = this.attachment(ctx);
    this.apply({ type: "attached", att });
    this.listen(att);
    note(`a detached exec was re-attached: replaying ${replay.length} frame(s) to the wrapper`);
    ctx.sendJson({ type: "attached", received: this.up.received });
    ctx.sendJson({ type: "ack", seq: this.up.processed });
    // What it already holds counts as acknowledged (it wrote it out before asking).
    this.onAck(received);
    for (const f of replay) ctx.sendRaw(f);
    return released;
  }

  private dropResume(): void {
    if (!this.resume) return;
    if (byToken.get(this.resume.token) === this) byToken.delete(this.resume.token);
    this.resume = null;
    this.apply({ type: "drop-resume" });
  }

  /** The client of attachment `gen` went away while the link was down (a client-gone notice on the next channel). */
  abandon(gen: number): void {
    this.apply({ type: "abandon", gen });
  }

  /** Ends the session if it is detached (see loseDetached); true when it did. */
  unreachable(): boolean {
    const before = this.model.state.kind;
    this.apply({ type: "unreachable" });
    return before !== this.model.state.kind;
  }

  /** Feeds one event to the session's rules and performs what they decide. */
  private apply(e: SessionEvent<Attachment>): void {
    const { model, actions } = stepSession(this.model, e);
    this.model = model;
    for (const a of actions) {
      switch (a.do) {
        case "start-grace":
          this.graceTimer = setTimeout(() => this.apply({ type: "grace-expired" }), a.ms);
          this.graceTimer.unref?.();
          break;
        case "stop-grace":
          clearTimeout(this.graceTimer);
          this.graceTimer = undefined;
          break;
        case "release":
          a.att.release();
          break;
        case "lose":
          for (const l of this.closeListeners.splice(0)) l(a.how);
          break;
        case "finish":
          clearTimeout(this.graceTimer);
          if (this.resume && byToken.get(this.resume.token) === this) byToken.delete(this.resume.token);
          this.resolveDone();
          break;
        case "note":
          note(a.line);
          break;
      }
    }
  }

  /** A conversation as the session's attachment, and when it is let go. */
  private attachment(ctx: AgentContext): { att: Attachment; released: Promise<void> } {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    return { att: { ctx, release }, released };
  }

  /** Its frames and close reach the session while it is the attached one. */
  private listen(att: Attachment): void {
    const ctx = att.ctx;
    ctx.onFrame((f) => {
      if (this.current === att) this.onUp(f);
    });
    ctx.onClose((how) => this.apply({ type: "stream-closed", att, how }));
  }

  private sendDown(buf: Buffer, weight: number, final: boolean): boolean {
    if (this.isDone) return false;
    this.down.append(buf, weight);
    if (final) this.apply({ type: "final-sent" });
    const current = this.current;
    return current ? current.ctx.sendRaw(buf) : true;
  }

  private onUp(f: Frame): void {
    const c = decodeConversationFrame(f);
    if (c.kind === "ack") this.onAck(c.seq);
    if (c.kind !== "numbered") return;
    if (f.kind === FrameKind.Stdin) this.stdinPending.push(this.up.next(false));
    else this.up.next(true);
    this.scheduleAck();
    if (this.frameListeners.length === 0) this.early.push(f);
    for (const l of this.frameListeners) l(f);
  }

  private onAck(seq: number): void {
    const freed = this.down.ack(seq);
    if (freed > 0) for (const l of this.ackListeners) l(freed);
    if (this.down.length === 0) this.apply({ type: "all-acked" });
  }

  private scheduleAck(): void {
    if (this.ackScheduled) return;
    this.ackScheduled = true;
    setImmediate(() => {
      this.ackScheduled = false;
      this.current?.ctx.sendJson({ type: "ack", seq: this.up.processed });
    });
  }
}

/**
 * The daemon can no longer be reached (its socket path leads elsewhere and no channel is open): no
 * wrapper can re-attach, so every detached session ends now instead of when its grace runs out
 * (up to reconnectGraceMs, by default ten minutes of a daemon and a workload nobody can reach).
 */
export function loseDetached(): number {
  let n = 0;
  for (const s of [...byToken.values()]) if (s.unreachable()) n++;
  return n;
}

/** The `resume` field of a checked exec.run request, its grace clamped. */
export function resumeOf(resume: ExecRunRequest["resume"]): { token: string; graceMs: number } | null {
  return resume === undefined ? null : { token: resume.token, graceMs: Math.min(resume.graceMs, MAX_GRACE_MS) };
}

/**
 * A client-gone notice (ClientGoneHeader): the client of attachment `gen` of the exec `token` went
 * away while the link was down. Unknown tokens are a no-op (the exec ended or was reaped already).
 */
export function clientGone(token: string, gen: number): void {
  findSession(token)?.abandon(gen);
}
