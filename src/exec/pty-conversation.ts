// PTY mode on the runtime side, in one of two ways the agent chooses:
//   * The agent owns the terminal (the host has python3 or util-linux `script`): it simply answers
//     `started`. Terminal output then arrives as Stdout frames of this conversation (the same
//     output window and acknowledgements as pipes), fd0 goes back as Stdin frames within a window
//     of input the remote terminal has not taken, and a resize is a `resize` message the agent
//     answers with `resized` once the terminal has the size. No other channel is opened.
//   * sshd owns it (the host has neither): the agent answers with a token first; we open an SSH
//     channel with a server-side pty of the envelope's size running `pty-attach <token>`; terminal
//     output is that channel's output, fd0 its input, and a resize is an SSH window-change that
//     the agent confirms on the remote terminal.
// Either way resizes are processed one at a time and acknowledged on fd4 only once confirmed, and
// fd0 is held (bounded) until the terminal is known. Resizes that queue up meanwhile (behind one in
// flight, or while the exec's stream is being re-attached after a lost link) are coalesced: only
// the latest size is sent, and once it is applied every id it covers is acknowledged, in order.
// A terminal the agent owns survives a lost link like a pipes exec; sshd's pty cannot (its
// channel dies with the link), so `pty-token` makes the conversation non-resumable.
import { RuntimeError } from "../shared/errors.js";
import { sleep } from "../shared/async.js";
import type { ExecAgentMessage } from "../shared/agent-api.js";
import type { PtyChannel } from "../transport/host.js";
import { Conversation, type ConversationParts, type ResizeControl } from "./exec-conversation.js";
import { PtyStdin, TerminalInput } from "./pty-stdin.js";

/** After a PTY workload exited: how long to wait for the pty channel to deliver its last output. */
export const PTY_DRAIN_MS = 2000;

export interface PtyStdio {
  kind: "pty";
  rows: number;
  cols: number;
  term?: string;
}

export class PtyConversation extends Conversation {
  /** sshd's pty: the channel running pty-attach. */
  private pty: PtyChannel | null = null;
  /** Whether the agent answered with a token (sshd's pty) rather than owning the terminal. */
  private sshdPty = false;
  /** The agent's own terminal: input sent on this conversation. */
  private terminalInput: TerminalInput | null = null;
  private forwarding = false;
  /** fd0 as terminal input, bounded before and after the pty channel opens. */
  private readonly input: PtyStdin;
  private readonly resizes: ResizeControl[] = [];
  /** The id sent and awaiting `resized`, and every id its size answers (older queued ones too). */
  private resizeInFlight: { id: number; covers: number[] } | null = null;

  constructor(
    parts: ConversationParts,
    private readonly stdio: PtyStdio,
  ) {
    super(parts);
    this.input = new PtyStdin(this.io.stdin);
    this.ch.on("reattached", () => this.nextResize());
  }

  /** A terminal has no end of input: fd0 EOF in PTY mode only means Paseo is done writing. */
  protected pumpStdin(): void {
    const stdin = this.io.stdin;
    stdin.on("data", (d: Buffer) => this.input.push(d));
    stdin.on("error", () => undefined);
  }

  protected onModeMessage(msg: ExecAgentMessage): void {
    if (msg.type === "pty-token") {
      this.sshdPty = true;
      this.ch.dropResume();
      void this.attach(msg.token);
    } else if (msg.type === "resized") this.onResized(msg.id, msg.ok);
  }

  protected override afterStarted(): void {
    if (this.sshdPty) {
      this.forwardOutput();
      return;
    }
    // `started` without a token: the agent owns the terminal; its output already comes as frames.
    this.terminalInput = new TerminalInput(this.ch);
    this.input.attach(this.terminalInput);
  }

  protected override async drainOutput(): Promise<void> {
    if (this.pty) await Promise.race([this.pty.closed, sleep(PTY_DRAIN_MS)]);
  }

  protected override release(): void {
    this.pty?.destroy();
  }

  private async attach(token: string): Promise<void> {
    try {
      const pty = await this.parts.host.openPty(["pty-attach", token], {
        rows: this.stdio.rows,
        cols: this.stdio.cols,
        ...(this.stdio.term ? { term: this.stdio.term } : {}),
      });
      this.pty = pty;
      if (this.events.started) this.forwardOutput();
      this.nextResize();
      pty.stdin.on("error", () => undefined);
      this.input.attach(pty.stdin);
    } catch (err) {
      this.ch.destroy();
      this.settle({ kind: "error", err: err instanceof RuntimeError ? err : new RuntimeError("network", String(err)) });
    }
  }

  /**
   * Terminal output goes to fd1 only after fd4 `started`, so Paseo never sees workload bytes of an
   * exec it cannot signal yet; until then the stream holds them (bounded by the SSH window).
   */
  private forwardOutput(): void {
    const pty = this.pty;
    if (!pty || this.forwarding) return;
    this.forwarding = true;
    pty.output.on("data", (d: Buffer) => {
      if (!this.io.stdout.write(d)) {
        pty.output.pause();
        this.io.stdout.once("drain", () => pty.output.resume());
      }
    });
  }

  protected onResize(r: ResizeControl): void {
    this.resizes.push(r);
    this.nextResize();
  }

  private nextResize(): void {
    if (this.resizeInFlight !== null || !(this.pty || this.terminalInput) || this.ch.reattaching) return;
    const queued = this.resizes.splice(0);
    const r = queued[queued.length - 1];
    if (!r) return;
    this.resizeInFlight = { id: r.id, covers: queued.map((q) => q.id) };
    this.pty?.setWindow(r.rows, r.cols);
    this.ch.sendJson({ type: "resize", id: r.id, rows: r.rows, cols: r.cols });
  }

  private onResized(id: number, ok: boolean): void {
    const inFlight = this.resizeInFlight;
    if (id !== inFlight?.id) return;
    this.resizeInFlight = null;
    if (this.events.done || this.failing) return;
    if (!ok) {
      void this.fail("PTY resize was not applied by the remote terminal");
      return;
    }
    // The exit may already be known; `resized` after `eof` would be fatal, so it cannot follow.
    for (const covered of inFlight.covers) this.events.resized(covered);
    this.nextResize();
  }
}
