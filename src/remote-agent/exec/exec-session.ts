// One exec as the daemon keeps it across streams (src/shared/stream-replay.ts): the exec's op code talks
// to an ExecContext that outlives the conversation it started on. Down frames are numbered and
// kept until the wrapper acknowledges them; up frames are numbered and acknowledged once the op
// processed them. When the stream is lost with the link, a resumable session is *detached*: the
// workload runs on (blocked by the output window at worst) and `exec.attach` from the wrapper —
// through the same or a new broker and channel — takes the session over and replays both ways.
// Past the reconnect grace, or when the wrapper itself is gone, the op hears the loss and the loss
// rule (sessions.ts) reaps the tree.
import { RuntimeError } from "../../shared/errors.js";
import { FrameKind, encodeJson, type Frame } from "../../shared/frames.js";
import { ReceiveCounter, ReplayLog, abandonApplies, isUnnumbered } from "../../shared/stream-replay.js";
import { decodeRuntimeMessage, type AgentMessage, type ExecRunRequest } from "../../shared/agent-api.js";
import type { AgentContext, ConversationEnd } from "../context.js";

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

export function sessionCount(): number {
  return byToken.size;
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
  private current: Attachment | null = null;
  private readonly frameListeners: Array<(f: Frame) => void> = [];
  /** Up frames that arrived before the op listened. */
  private readonly early: Frame[] = [];
  private readonly closeListeners: Array<(how: ConversationEnd) => void> = [];
  private readonly ackListeners: Array<(bytes: number) => void> = [];
  private lostHow: ConversationEnd | null = null;
  /** The latest attach generation the wrapper asked for (exec.run is 0); older abandons are stale. */
  private latestGen = 0;
  private finalSent = false;
  private isDone = false;
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
      onClose: (l) => (this.lostHow !== null ? l(this.lostHow) : this.closeListeners.push(l)),
      inputTaken: () => {
        const seq = this.stdinPending.shift();
        if (seq !== undefined && this.up.complete(seq)) this.scheduleAck();
      },
      onOutputAcked: (l) => this.ackListeners.push(l),
      dropResume: () => this.dropResume(),
    };
    this.bind(first);
  }

  get resumable(): boolean {
    return this.resume !== null && this.resume.graceMs > 0;
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
    this.latestGen = Math.max(this.latestGen, gen);
    const replay = this.down.after(received);
    if (replay === null || received > this.down.sent) {
      throw new RuntimeError(
        "remote",
        `exec.attach: the wrapper holds frame ${received}, the host daemon kept ${this.down.acked}-${this.down.sent}`,
      );
    }
    clearTimeout(this.graceTimer);
    this.graceTimer = undefined;
    const released = this.bind(ctx);
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
    // Already detached (the stream was lost while the exec was starting): nobody will re-attach.
    if (this.graceTimer !== undefined && this.current === null) this.lose("link-lost");
  }

  /**
   * The client of attachment `gen` went away while the link was down (a client-gone notice on the
   * next channel). Ignored when the wrapper has attached (or asked to) since: it is alive.
   */
  abandon(gen: number): void {
    if (!abandonApplies(gen, this.latestGen)) {
      note(`ignored an abandon of attachment ${gen}: the wrapper has asked for attachment ${this.latestGen} since`);
      return;
    }
    note("the wrapper of a detached exec went away during the outage: reaping it");
    this.lose("client-gone");
  }

  /** Ends the session if it is detached (see loseDetached); true when it did. */
  unreachable(): boolean {
    if (this.isDone || this.current !== null || this.graceTimer === undefined) return false;
    note("a detached exec can no longer be re-attached (this daemon's socket path leads elsewhere): reaping it");
    this.lose("expired");
    return true;
  }

  private bind(ctx: AgentContext): Promise<void> {
    this.current?.release();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const att: Attachment = { ctx, release };
    this.current = att;
    ctx.onFrame((f) => {
      if (this.current === att) this.onUp(f);
    });
    ctx.onClose((how) => {
      if (this.current !== att) return;
      this.current = null;
      release();
      this.onStreamClosed(how);
    });
    return released;
  }

  private sendDown(buf: Buffer, weight: number, final: boolean): boolean {
    if (this.isDone) return false;
    this.down.append(buf, weight);
    if (final) this.finalSent = true;
    return this.current ? this.current.ctx.sendRaw(buf) : true;
  }

  private onUp(f: Frame): void {
    if (isUnnumbered(f)) {
      const msg = decodeRuntimeMessage(f.payload);
      if (msg?.type === "ack") this.onAck(msg.seq);
      return;
    }
    if (f.kind === FrameKind.Stdin) this.stdinPending.push(this.up.next(false));
    else this.up.next(true);
    this.scheduleAck();
    if (this.frameListeners.length === 0) this.early.push(f);
    for (const l of this.frameListeners) l(f);
  }

  private onAck(seq: number): void {
    const freed = this.down.ack(seq);
    if (freed > 0) for (const l of this.ackListeners) l(freed);
    if (this.finalSent && this.down.length === 0) this.finish();
  }

  private scheduleAck(): void {
    if (this.ackScheduled) return;
    this.ackScheduled = true;
    setImmediate(() => {
      this.ackScheduled = false;
      this.current?.ctx.sendJson({ type: "ack", seq: this.up.processed });
    });
  }

  private onStreamClosed(how: ConversationEnd): void {
    if (this.isDone) return;
    // The wrapper ends its side only after it wrote the exit out; a dead wrapper needs nothing more.
    if (this.finalSent && (how === "end" || how === "client-gone")) return this.finish();
    if ((how === "link-lost" || how === "error") && this.resumable) {
      note(`an exec's stream was lost (${how}): detached, waiting up to ${this.resume!.graceMs} ms for its wrapper`);
      this.graceTimer = setTimeout(() => {
        note(`a detached exec's reconnect grace (${this.resume!.graceMs} ms) ran out: reaping it`);
        this.lose("expired");
      }, this.resume!.graceMs);
      this.graceTimer.unref?.();
      return;
    }
    this.lose(how);
  }

  /** Nobody will attach any more: the op hears it (and reaps), the session ends. */
  private lose(how: ConversationEnd): void {
    if (this.lostHow !== null || this.isDone) return;
    clearTimeout(this.graceTimer);
    this.lostHow = how;
    for (const l of this.closeListeners.splice(0)) l(how);
    this.finish();
  }

  private finish(): void {
    if (this.isDone) return;
    this.isDone = true;
    clearTimeout(this.graceTimer);
    if (this.resume && byToken.get(this.resume.token) === this) byToken.delete(this.resume.token);
    this.current?.release();
    this.current = null;
    this.resolveDone();
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

/** The longest reconnect grace (the option's bound); a timer past 2^31 ms would fire at once. */
export const MAX_GRACE_MS = 86_400_000;

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
