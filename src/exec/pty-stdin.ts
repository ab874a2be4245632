// fd0 -> the terminal's input, with bounded memory whatever Paseo writes: before the terminal is
// attached at most PTY_PREATTACH_MAX bytes are held (then fd0 is no longer read), and afterwards
// fd0 is paused whenever the sink does not take more (write() returned false) until it drains.
// The sink is the sshd PTY channel (behind it the broker socket, SSH window and remote terminal
// push back the same way) or the exec's own conversation (a window of input the remote terminal
// has not taken yet, TerminalInput below), so a fast writer is slowed down instead of filling
// this process.
import { EventEmitter } from "node:events";
import type { Readable } from "node:stream";
import { FrameKind, encodeData } from "../shared/frames.js";
import type { ExecLink } from "./exec-link.js";

/** Terminal input held until the terminal is attached. */
export const PTY_PREATTACH_MAX = 1024 * 1024;
/** Terminal input sent on the conversation but not yet taken by the remote terminal. */
export const PTY_INPUT_WINDOW = 1024 * 1024;

/** Where terminal input goes: write() false means "wait for drain". */
export interface InputSink {
  write(data: Buffer): boolean;
  once(event: "drain", listener: () => void): unknown;
}

/**
 * Terminal input as Stdin frames of the exec's conversation: write() reports false while more
 * than PTY_INPUT_WINDOW bytes are unacknowledged, `drain` follows the acknowledgements.
 */
export class TerminalInput extends EventEmitter implements InputSink {
  private unacked = 0;

  constructor(private readonly ch: ExecLink) {
    super();
    ch.on("stdinTaken", (bytes) => this.acknowledged(bytes));
  }

  write(data: Buffer): boolean {
    this.ch.send(encodeData(FrameKind.Stdin, data), data.length);
    this.unacked += data.length;
    return this.unacked <= PTY_INPUT_WINDOW;
  }

  /** The remote terminal took `bytes` more. */
  acknowledged(bytes: number): void {
    const before = this.unacked;
    this.unacked -= bytes;
    if (before > PTY_INPUT_WINDOW && this.unacked <= PTY_INPUT_WINDOW) this.emit("drain");
  }
}

export class PtyStdin {
  private held: Buffer[] = [];
  private heldBytes = 0;
  private sink: InputSink | null = null;
  private waiting = false;

  constructor(private readonly fd0: Readable) {}

  push(data: Buffer): void {
    if (this.sink) return this.write(data);
    this.held.push(data);
    this.heldBytes += data.length;
    if (this.heldBytes > PTY_PREATTACH_MAX) this.fd0.pause();
  }

  attach(sink: InputSink): void {
    this.sink = sink;
    const held = this.held.splice(0);
    this.heldBytes = 0;
    for (const d of held) this.write(d);
    if (!this.waiting) this.fd0.resume();
  }

  private write(data: Buffer): void {
    const sink = this.sink!;
    if (sink.write(data) || this.waiting) return;
    this.waiting = true;
    this.fd0.pause();
    sink.once("drain", () => {
      this.waiting = false;
      this.fd0.resume();
    });
  }
}
