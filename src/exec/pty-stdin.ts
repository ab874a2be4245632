// fd0 -> the PTY channel's input, with bounded memory whatever Paseo writes: before the channel is
// attached at most PTY_PREATTACH_MAX bytes are held (then fd0 is no longer read), and afterwards
// fd0 is paused whenever the channel does not take more (write() returned false) until it drains.
// The chain behind the channel (broker socket, SSH window, the remote terminal) pushes back the
// same way, so a fast writer is slowed down instead of filling this process.
import type { Readable, Writable } from "node:stream";

/** Terminal input held until the PTY channel is attached. */
export const PTY_PREATTACH_MAX = 1024 * 1024;

export class PtyStdin {
  private held: Buffer[] = [];
  private heldBytes = 0;
  private sink: Writable | null = null;
  private waiting = false;

  constructor(private readonly fd0: Readable) {}

  push(data: Buffer): void {
    if (this.sink) return this.write(data);
    this.held.push(data);
    this.heldBytes += data.length;
    if (this.heldBytes > PTY_PREATTACH_MAX) this.fd0.pause();
  }

  attach(sink: Writable): void {
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
