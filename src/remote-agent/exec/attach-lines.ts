// Newline-delimited JSON over the local Unix socket between a PTY exec's control agent and its
// pty-attach process. Both ends are our own code on the same host; the socket lives in a 0700
// directory, so the launch message may carry the workload env (never a command line or file).
import type { Socket } from "node:net";
import {
  arrayOf,
  isBoolean,
  isInteger,
  isString,
  literal,
  nullable,
  object,
  recordOf,
  variant,
  type Guard,
  type Infer,
} from "../../shared/guards.js";

/** control agent → pty-attach: what to spawn (the workload env travels only here). */
export const LaunchLine = object({
  type: literal("launch"),
  file: isString,
  args: arrayOf(isString),
  argv0: isString,
  cwd: isString,
  env: recordOf(isString),
  tagPath: isString,
});
export type LaunchLine = Infer<typeof LaunchLine>;

/** control agent → pty-attach: confirm the terminal shows this size (a runtime `resize`). */
export const CheckSizeLine = object({ type: literal("check-size"), id: isInteger, rows: isInteger, cols: isInteger });
export type CheckSizeLine = Infer<typeof CheckSizeLine>;

/** pty-attach → control agent: the workload runs; its identity. */
export const SpawnedLine = object({ type: literal("spawned"), pid: isInteger, pgid: isInteger, sid: isInteger, startTime: isString });
export type SpawnedLine = Infer<typeof SpawnedLine>;

/** pty-attach → control agent: the program could not be executed (126/127 and the text to show). */
export const SpawnFailedLine = object({ type: literal("spawn-failed"), code: isInteger, message: isString });
export type SpawnFailedLine = Infer<typeof SpawnFailedLine>;

/** pty-attach → control agent: the answer to `check-size`. */
export const SizeLine = object({ type: literal("size"), id: isInteger, ok: isBoolean });
export type SizeLine = Infer<typeof SizeLine>;

/** pty-attach → control agent: the workload's wait status. */
export const AttachExitLine = object({ type: literal("exit"), code: nullable(isInteger), signal: nullable(isString) });
export type AttachExitLine = Infer<typeof AttachExitLine>;

export const isControlLine = variant("type", { launch: LaunchLine, "check-size": CheckSizeLine });
export type ControlLine = Infer<typeof isControlLine>;

export const isAttachLine = variant("type", {
  spawned: SpawnedLine,
  "spawn-failed": SpawnFailedLine,
  size: SizeLine,
  exit: AttachExitLine,
});
export type AttachLine = Infer<typeof isAttachLine>;

export function sendLine(sock: Socket, msg: ControlLine | AttachLine): void {
  if (!sock.destroyed) sock.write(JSON.stringify(msg) + "\n");
}

/** Calls `handle` for each line that passes `guard`; a line that is not JSON ends the connection. */
export function onLines<T>(sock: Socket, guard: Guard<T>, handle: (msg: T) => void): void {
  // The line in progress, in pieces: a launch line of several MiB (a large env) is joined once
  // instead of being re-scanned and re-copied for every chunk.
  let pending: string[] = [];
  sock.setEncoding("utf8");
  sock.on("data", (chunk: string) => {
    let start = 0;
    for (let nl = chunk.indexOf("\n"); nl >= 0; nl = chunk.indexOf("\n", start)) {
      pending.push(chunk.slice(start, nl));
      const line = pending.join("");
      pending = [];
      start = nl + 1;
      if (line === "") continue;
      let msg: unknown;
      try {
        msg = JSON.parse(line);
      } catch {
        sock.destroy();
        return;
      }
      if (guard(msg)) handle(msg);
    }
    if (start < chunk.length) pending.push(chunk.slice(start));
  });
}
