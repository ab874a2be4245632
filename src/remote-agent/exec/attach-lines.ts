// Newline-delimited JSON over the local Unix socket between a PTY exec's control agent and its
// pty-attach process. Both ends are our own code on the same host; the socket lives in a 0700
// directory, so the launch message may carry the workload env (never a command line or file).
import type { Socket } from "node:net";
import { arrayOf, isInteger, isString, literal, nullable, object, recordOf, type Guard } from "../../shared/guards.js";

/** control agent → pty-attach: what to spawn (the workload env travels only here). */
export interface LaunchLine {
  type: "launch";
  file: string;
  args: string[];
  argv0: string;
  cwd: string;
  env: Record<string, string>;
  tagPath: string;
}

/** control agent → pty-attach: confirm the terminal shows this size (a runtime `resize`). */
export interface CheckSizeLine {
  type: "check-size";
  id: number;
  rows: number;
  cols: number;
}

/** pty-attach → control agent: the workload runs; its identity. */
export interface SpawnedLine {
  type: "spawned";
  pid: number;
  pgid: number;
  sid: number;
  startTime: string;
}

/** pty-attach → control agent: the program could not be executed (126/127 and the text to show). */
export interface SpawnFailedLine {
  type: "spawn-failed";
  code: number;
  message: string;
}

/** pty-attach → control agent: the answer to `check-size`. */
export interface SizeLine {
  type: "size";
  id: number;
  ok: boolean;
}

/** pty-attach → control agent: the workload's wait status. */
export interface AttachExitLine {
  type: "exit";
  code: number | null;
  signal: string | null;
}

export type ControlLine = LaunchLine | CheckSizeLine;
export type AttachLine = SpawnedLine | SpawnFailedLine | SizeLine | AttachExitLine;

export const isControlLine: Guard<ControlLine> = (v): v is ControlLine =>
  object({
    type: literal("launch"),
    file: isString,
    args: arrayOf(isString),
    argv0: isString,
    cwd: isString,
    env: recordOf(isString),
    tagPath: isString,
  })(v) || object({ type: literal("check-size"), id: isInteger, rows: isInteger, cols: isInteger })(v);

export const isAttachLine: Guard<AttachLine> = (v): v is AttachLine =>
  object({ type: literal("spawned"), pid: isInteger, pgid: isInteger, sid: isInteger, startTime: isString })(v) ||
  object({ type: literal("spawn-failed"), code: isInteger, message: isString })(v) ||
  object({ type: literal("size"), id: isInteger, ok: (x): x is boolean => typeof x === "boolean" })(v) ||
  object({ type: literal("exit"), code: nullable(isInteger), signal: nullable(isString) })(v);

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
