// Buffers the frames a runtime sends after its request so an op can consume them when it is ready
// (the create conversation's object stream), and notices an abort or a lost channel.
import type { Writable } from "node:stream";
import { FrameKind, type Frame } from "../../shared/frames.js";
import { RuntimeError } from "../../shared/errors.js";
import type { AgentContext } from "../context.js";
import { decodeRuntimeMessage, type AbortMessage } from "../../shared/agent-api.js";
import { parseJson } from "../../shared/guards.js";

const MALFORMED: AbortMessage = { type: "abort", message: "malformed control frame from the runtime" };
const HIGH_WATER = 8 * 1024 * 1024;
const LOW_WATER = 1024 * 1024;

function drainOrClose(sink: Writable): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      sink.off("drain", done).off("close", done).off("error", done);
      resolve();
    };
    sink.once("drain", done).once("close", done).once("error", done);
  });
}

export class FrameInbox {
  private queue: Frame[] = [];
  private queuedBytes = 0;
  private inputPaused = false;
  private wake: (() => void) | null = null;
  closed = false;
  aborted: string | null = null;

  constructor(private readonly ctx: AgentContext) {
    ctx.onFrame((f) => {
      if (f.kind === FrameKind.Json) {
        const msg = parseJson(f.payload) === undefined ? MALFORMED : decodeRuntimeMessage(f.payload);
        if (msg?.type === "abort") this.aborted = msg.message;
      } else {
        this.queue.push(f);
        this.queuedBytes += f.payload.length;
        // Flow control: stop reading the channel while the consumer is behind (SSH then holds
        // the sender back), so a large object stream never piles up in this process.
        if (this.queuedBytes > HIGH_WATER && !this.inputPaused) {
          this.inputPaused = true;
          ctx.pauseInput();
        }
      }
      this.notify();
    });
    ctx.onClose(() => {
      this.closed = true;
      this.notify();
    });
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  /** Throws when the runtime gave up or went away: the create must not continue unattended. */
  assertAttended(): void {
    if (this.aborted !== null) throw new RuntimeError("remote", `create aborted by the runtime: ${this.aborted}`);
    if (this.closed) throw new RuntimeError("network", "the runtime disconnected during create");
  }

  /**
   * Writes Stdin frames to `sink` until the Eof frame for stdin; rejects on abort, loss, or when
   * the stream has not finished within `timeoutMs` (a stalled runtime must not pin the agent).
   */
  async pipeStdinTo(sink: Writable, timeoutMs: number): Promise<void> {
    const timer = setTimeout(() => {
      this.aborted ??= `object stream not finished within ${timeoutMs} ms`;
      this.notify();
    }, timeoutMs);
    try {
      await this.drainInto(sink);
    } finally {
      clearTimeout(timer);
    }
  }

  private async drainInto(sink: Writable): Promise<void> {
    for (;;) {
      const f = this.queue.shift();
      if (f) {
        this.queuedBytes -= f.payload.length;
        if (this.inputPaused && this.queuedBytes < LOW_WATER) {
          this.inputPaused = false;
          this.ctx.resumeInput();
        }
        if (f.kind === FrameKind.Eof) return;
        if (f.kind === FrameKind.Stdin && !sink.write(f.payload)) await drainOrClose(sink);
        continue;
      }
      this.assertAttended();
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}
