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
import type { AgentContext } from "../context.js";
import { closeTag, openTag, taggedStdio, type Launch } from "./launch.js";
import { identityNow, type ExecSupervisor } from "./supervisor.js";
import { execTagPath } from "../proc/process-set.js";
import { decodeRuntimeMessage } from "../../shared/agent-api.js";

export const OUTPUT_IDLE_MS = 1000;
export const OUTPUT_MAX_MS = 10_000;
/**
 * Output bytes sent but not yet acknowledged by the wrapper (written to Paseo's fd1/fd2): above
 * this the workload's pipes are no longer read, so a slow reader on the Paseo side slows the
 * workload down instead of filling the wrapper's memory.
 */
export const OUTPUT_WINDOW = 4 * 1024 * 1024;

type Child = ChildProcessByStdio<Writable, Readable, Readable>;

export async function runPipes(
  ctx: AgentContext,
  sup: ExecSupervisor,
  launch: Launch | null,
  env: Record<string, string>,
  argv0: string,
): Promise<void> {
  let child: Child | null = null;
  const stdinQueue: Buffer[] = [];
  let stdinEnded = false;

  // Each stdin chunk is acknowledged once the workload's pipe took it; the wrapper keeps at most
  // STDIN_WINDOW unacknowledged (it stops reading fd0), so this channel is never paused and
  // controls (signals, acks) always get through.
  const writeStdin = (data: Buffer) => {
    if (!child || child.stdin.destroyed) return;
    child.stdin.write(data, () => ctx.sendJson({ type: "stdin-ack", bytes: data.length }));
  };
  ctx.onFrame((f: Frame) => {
    if (f.kind === FrameKind.Stdin) {
      if (child) writeStdin(f.payload);
      else stdinQueue.push(f.payload);
    } else if (f.kind === FrameKind.Eof && f.payload[0] === 0) {
      if (child) child.stdin.end();
      else stdinEnded = true;
    } else if (f.kind === FrameKind.Json) {
      const msg = decodeRuntimeMessage(f.payload);
      if (msg?.type === "ack") {
        unacked -= msg.bytes;
        updateFlow();
      } else if (msg?.type === "signal") sup.deliver(msg.signal);
    }
  });

  // Output flow: paused while the SSH channel wants draining or the wrapper's window is full.
  let unacked = 0;
  let drainWait = false;
  const outputs: Readable[] = [];
  const updateFlow = () => {
    const hold = drainWait || unacked > OUTPUT_WINDOW;
    for (const o of outputs) {
      if (hold) o.pause();
      else o.resume();
    }
  };

  const closed = new Promise<void>((resolve) => ctx.onClose(() => resolve()));

  if (!launch) return sup.notFound(argv0);

  const tagFd = openTag(execTagPath(sup.layout, sup.execId));
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
  // Read the identity now: until the event loop runs, an exited child is still an unreaped zombie.
  const ident = c.pid !== undefined ? identityNow(c.pid) : null;
  c.stdin.on("error", () => undefined); // the workload closed its stdin: further input is dropped
  // A program that exists but cannot be executed is reported like a shell would: 126 (127: missing).
  const exited = new Promise<{ code: number | null; signal: string | null; spawnError?: string }>((resolve) => {
    c.once("exit", (code, signal) => resolve({ code, signal }));
    c.once("error", (err: NodeJS.ErrnoException) => {
      if (c.pid === undefined) resolve({ code: err.code === "ENOENT" ? 127 : 126, signal: null, spawnError: err.message });
    });
  });

  await sup.publish(ident);
  if (sup.abandoned) return;
  for (const d of stdinQueue.splice(0)) writeStdin(d);
  if (stdinEnded) c.stdin.end();

  let lastData = Date.now();
  const pump = (stream: Readable, kind: FrameKind) =>
    new Promise<void>((resolve) => {
      outputs.push(stream);
      stream.on("data", (chunk: Buffer) => {
        lastData = Date.now();
        unacked += chunk.length;
        for (const fr of encodeData(kind, chunk)) ctx.sendRaw(fr);
        if (process.stdout.writableNeedDrain && !drainWait) {
          drainWait = true;
          process.stdout.once("drain", () => {
            drainWait = false;
            lastData = Date.now();
            updateFlow();
          });
        }
        updateFlow();
      });
      stream.once("end", resolve);
      stream.once("close", resolve);
      stream.once("error", () => resolve());
    });
  const drained = Promise.all([pump(c.stdout, FrameKind.Stdout), pump(c.stderr, FrameKind.Stderr)]);

  const status = await Promise.race([exited, closed.then(() => null)]);
  if (status === null) {
    // Nobody is left to report to: reap the tree (after the grace) whatever the workload does now.
    await sup.abandon();
    return;
  }
  const result = status;
  const exitAt = Date.now();
  // Idle is counted from the exit at the earliest, so bytes still in the pipe are never cut off.
  lastData = Math.max(lastData, exitAt);
  await Promise.race([
    drained,
    closed,
    new Promise<void>((resolve) => {
      const tick = setInterval(() => {
        const held = drainWait || unacked > OUTPUT_WINDOW;
        if (held) lastData = Date.now();
        const idle = !held && Date.now() - lastData >= OUTPUT_IDLE_MS;
        if (idle || Date.now() - exitAt >= OUTPUT_MAX_MS) {
          clearInterval(tick);
          resolve();
        }
      }, 50);
      void drained.then(() => clearInterval(tick));
    }),
  ]);
  c.stdout.destroy();
  c.stderr.destroy();
  if (result.spawnError) {
    for (const fr of encodeData(FrameKind.Stderr, Buffer.from(`paseo-ssh-runtime: ${argv0}: ${result.spawnError}\n`))) ctx.sendRaw(fr);
  }
  ctx.sendRaw(encodeFrame(FrameKind.Eof, Buffer.from([1])));
  ctx.sendRaw(encodeFrame(FrameKind.Eof, Buffer.from([2])));
  sup.complete(result.code, result.signal);
}
