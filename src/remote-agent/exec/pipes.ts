// Pipes-mode exec on the agent: spawns the workload in its own session (exact env, no shell),
// multiplexes its stdin/stdout/stderr as frames byte-exactly with backpressure both ways, and
// reports the real wait status.
//
// After the workload exits, its stdout/stderr are drained until they close, but descendants may
// keep them open (`sleep 30 &`): we stop waiting once no byte arrived for OUTPUT_IDLE_MS, and at
// most OUTPUT_MAX_MS after the exit. Such descendants keep running (they are reaped by destroy).
import { spawn, type ChildProcessByStdio } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { FrameKind, encodeData, encodeFrame, type Frame } from "../../shared/frames.js";
import type { ConversationEnd } from "../context.js";
import type { ExecContext } from "./exec-session.js";
import { closeTag, openTag, taggedStdio, type Launch } from "./launch.js";
import { identityNow, type ExecSupervisor } from "./supervisor.js";
import { execTagPath } from "../proc/process-set.js";
import { decodeRuntimeMessage, type ExecRunRequest } from "../../shared/agent-api.js";
import { conversationLost } from "./sessions.js";

export const OUTPUT_IDLE_MS = 1000;
export const OUTPUT_MAX_MS = 10_000;
/**
 * Output bytes sent but not yet acknowledged by the wrapper (written to Paseo's fd1/fd2): above
 * this the workload's pipes are no longer read, so a slow reader on the Paseo side slows the
 * workload down instead of filling the wrapper's memory.
 */
export const OUTPUT_WINDOW = 4 * 1024 * 1024;

type Child = ChildProcessByStdio<Writable, Readable, Readable>;
type Status = { code: number | null; signal: string | null; spawnError?: string };

/**
 * Workload stdin: frames that arrive before the child exists are queued. Each chunk counts as
 * taken once the workload's pipe (or its terminal's relay) took it, or dropped it (the workload
 * closed its stdin); the wrapper keeps at most STDIN_WINDOW unacknowledged (it stops reading fd0),
 * so this channel is never paused and controls (signals, acks) always get through.
 */
export class StdinForwarder {
  private sink: Writable | null = null;
  private readonly queue: Buffer[] = [];
  private ended = false;

  constructor(private readonly ctx: ExecContext) {}

  data(payload: Buffer): void {
    if (this.sink) this.write(payload);
    else this.queue.push(payload);
  }

  end(): void {
    if (this.sink) this.sink.end();
    else this.ended = true;
  }

  /** From now on input goes to `sink` (what was queued first). */
  attach(sink: Writable): void {
    this.sink = sink;
    for (const d of this.queue.splice(0)) this.write(d);
    if (this.ended) sink.end();
  }

  private write(data: Buffer): void {
    if (!this.sink || this.sink.destroyed) return this.ctx.inputTaken();
    this.sink.write(data, () => this.ctx.inputTaken());
  }
}

/**
 * Workload output as frames. Reading pauses while the channel wants draining or the wrapper's
 * window of unacknowledged bytes is full; `lastData` tells the drain after exit when output went
 * quiet.
 */
export class OutputFlow {
  private unacked = 0;
  private drainWait = false;
  private readonly outputs: Readable[] = [];
  lastData = Date.now();

  constructor(private readonly ctx: ExecContext) {
    ctx.onOutputAcked((bytes) => this.acknowledged(bytes));
  }

  /** True while output is held back by flow control (not the workload's silence). */
  get held(): boolean {
    return this.drainWait || this.unacked > OUTPUT_WINDOW;
  }

  acknowledged(bytes: number): void {
    this.unacked -= bytes;
    this.update();
  }

  /** Forwards `stream` as `kind` frames; resolves when it ends. */
  pump(stream: Readable, kind: FrameKind): Promise<void> {
    return new Promise<void>((resolve) => {
      this.outputs.push(stream);
      stream.on("data", (chunk: Buffer) => {
        this.lastData = Date.now();
        this.unacked += chunk.length;
        let full = false;
        for (const fr of encodeData(kind, chunk)) full = !this.ctx.sendRaw(fr) || full;
        if (full && !this.drainWait) {
          this.drainWait = true;
          void this.ctx.drained().then(() => {
            this.drainWait = false;
            this.lastData = Date.now();
            this.update();
          });
        }
        this.update();
      });
      stream.once("end", resolve);
      stream.once("close", resolve);
      stream.once("error", () => resolve());
    });
  }

  private update(): void {
    const hold = this.held;
    for (const o of this.outputs) {
      if (hold) o.pause();
      else o.resume();
    }
  }

  /**
   * After the exit: until the pipes close, or no byte arrived for OUTPUT_IDLE_MS (idle counted
   * from the exit at the earliest, and not while flow control holds output back), or
   * OUTPUT_MAX_MS passed.
   */
  async drainAfterExit(drained: Promise<unknown>, closed: Promise<void>): Promise<void> {
    // Time the wrapper holds output back (a slow reader, or a link being re-established) does not
    // count against OUTPUT_MAX_MS: the bound is for descendants writing on, not for acks.
    let exitAt = Date.now();
    this.lastData = Math.max(this.lastData, exitAt);
    await Promise.race([
      drained,
      closed,
      new Promise<void>((resolve) => {
        const tick = setInterval(() => {
          if (this.held) {
            this.lastData = Date.now();
            exitAt += 50;
          }
          const idle = !this.held && Date.now() - this.lastData >= OUTPUT_IDLE_MS;
          if (idle || Date.now() - exitAt >= OUTPUT_MAX_MS) {
            clearInterval(tick);
            resolve();
          }
        }, 50);
        void drained.then(() => clearInterval(tick));
      }),
    ]);
  }
}

/** Spawns the workload in its own group with the exec's tag; `exited` settles with its status. */
function spawnWorkload(sup: ExecSupervisor, launch: Launch, env: Record<string, string>): { child: Child; exited: Promise<Status> } {
  const tagFd = openTag(execTagPath(sup.layout, sup.execId));
  let child: Child;
  try {
    child = spawn(launch.file, launch.args, {
      argv0: launch.argv0,
      cwd: launch.cwd,
      env,
      detached: true,
      stdio: taggedStdio(["pipe", "pipe", "pipe"], tagFd),
    }) as unknown as Child;
  } finally {
    closeTag(tagFd);
  }
  const c = child;
  c.stdin.on("error", () => undefined); // the workload closed its stdin: further input is dropped
  // A program that exists but cannot be executed is reported like a shell would: 126 (127: missing).
  const exited = new Promise<Status>((resolve) => {
    c.once("exit", (code, signal) => resolve({ code, signal }));
    c.once("error", (err: NodeJS.ErrnoException) => {
      if (c.pid === undefined) resolve({ code: err.code === "ENOENT" ? 127 : 126, signal: null, spawnError: err.message });
    });
  });
  return { child: c, exited };
}

export async function runPipes(ctx: ExecContext, sup: ExecSupervisor, launch: Launch | null, req: ExecRunRequest): Promise<void> {
  const { env } = req;
  const argv0 = req.argv[0]!;
  const stdin = new StdinForwarder(ctx);
  const flow = new OutputFlow(ctx);
  ctx.onFrame((f: Frame) => {
    if (f.kind === FrameKind.Stdin) stdin.data(f.payload);
    else if (f.kind === FrameKind.Eof && f.payload[0] === 0) stdin.end();
    else if (f.kind === FrameKind.Json) {
      const msg = decodeRuntimeMessage(f.payload);
      if (msg?.type === "signal") sup.deliver(msg.signal);
    }
  });
  const closed = new Promise<ConversationEnd>((resolve) => ctx.onClose(resolve));

  if (!launch) return sup.notFound(argv0);
  const { child, exited } = spawnWorkload(sup, launch, env);
  // Read the identity now: until the event loop runs, an exited child is still an unreaped zombie.
  const ident = child.pid !== undefined ? identityNow(child.pid) : null;
  await sup.publish(ident);
  if (sup.abandoned) return;
  stdin.attach(child.stdin);
  const drained = Promise.all([flow.pump(child.stdout, FrameKind.Stdout), flow.pump(child.stderr, FrameKind.Stderr)]);

  const status = await Promise.race([exited, closed.then((how) => ({ lost: how }))]);
  if ("lost" in status) {
    // Nobody is left to report to: the loss rule decides (today: reap the tree after the grace).
    await conversationLost(sup, status.lost);
    return;
  }
  await flow.drainAfterExit(
    drained,
    closed.then(() => undefined),
  );
  child.stdout.destroy();
  child.stderr.destroy();
  if (status.spawnError) {
    for (const fr of encodeData(FrameKind.Stderr, Buffer.from(`paseo-ssh-runtime: ${argv0}: ${status.spawnError}\n`))) ctx.sendRaw(fr);
  }
  ctx.sendRaw(encodeFrame(FrameKind.Eof, Buffer.from([1])));
  ctx.sendRaw(encodeFrame(FrameKind.Eof, Buffer.from([2])));
  sup.complete(status.code, status.signal);
}
