// Buffers the frames a runtime sends after its request so an op can consume them when it is ready
// (the create conversation's object stream), and notices an abort or a lost channel.
import type { Writable } from "node:stream";
import { FrameKind, type Frame } from "../../shared/frames.js";
import { RuntimeError } from "../../shared/errors.js";
import type { AgentContext } from "../context.js";
import { decodeRuntimeMessage, type AbortMessage } from "../../shared/agent-api.js";
import { parseJson } from "../../shared/guards.js";

const MALFORMED: AbortMessage = { type: "abort", message: "malformed control frame from the runtime" };
// 2 MiB (was 8): a big create keeps the consumer (index-pack) behind all the way, and the agent's
// peak with a 256 MiB file fell from 130-147 MB RSS to 112-117 MB.
const HIGH_WATER = 2 * 1024 * 1024;
const LOW_WATER = 512 * 1024;

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

  /** Resolves at the next frame, abort or close, at any other notify(), or when `extra` wakes it. */
  private nextEvent(extra?: (wake: () => void) => () => void): Promise<void> {
    return new Promise<void>((resolve) => {
      let undo = () => {};
      const wake = () => {
        undo();
        if (this.wake === wake) this.wake = null;
        resolve();
      };
      this.wake = wake;
      if (extra) undo = extra(wake);
    });
  }

  /**
   * Writes Stdin frames to `sink` until the Eof frame for stdin. Rejects on abort or loss, as soon
   * as `sinkExit` rejects (the consumer died: nothing would ever drain its stdin again), or when
   * the stream has not finished within `timeoutMs` (a stalled runtime must not pin the agent).
   * A consumer that exits successfully before Eof has read all it needs; the rest is dropped.
   */
  async pipeStdinTo(sink: Writable, sinkExit: Promise<void>, timeoutMs: number): Promise<void> {
    let failure: unknown = null;
    let sinkDone = false;
    const stop = (err: unknown) => {
      failure ??= err;
      this.notify();
    };
    const timer = setTimeout(() => stop(new RuntimeError("remote", `object stream not finished within ${timeoutMs} ms`)), timeoutMs);
    sinkExit.then(
      () => {
        sinkDone = true;
        this.notify();
      },
      (err: unknown) => stop(err),
    );
    const drained = (wake: () => void) => {
      sink.once("drain", wake).once("close", wake).once("error", wake);
      return () => sink.off("drain", wake).off("close", wake).off("error", wake);
    };
    try {
      for (;;) {
        if (failure !== null) throw failure;
        if (this.aborted !== null) this.assertAttended();
        const f = this.queue.shift();
        if (!f) {
          this.assertAttended();
          await this.nextEvent();
          continue;
        }
        this.queuedBytes -= f.payload.length;
        if (this.inputPaused && this.queuedBytes < LOW_WATER) {
          this.inputPaused = false;
          this.ctx.resumeInput();
        }
        if (f.kind === FrameKind.Eof) return;
        if (f.kind !== FrameKind.Stdin || sinkDone || sink.destroyed) continue;
        if (sink.write(f.payload)) continue;
        // Frame arrivals wake this too; only drain (or an end of any kind) lets more through.
        while (sink.writableNeedDrain && !sink.destroyed && !sinkDone && failure === null && this.aborted === null && !this.closed) {
          await this.nextEvent(drained);
        }
      }
    } finally {
      clearTimeout(timer);
    }
  }
}
