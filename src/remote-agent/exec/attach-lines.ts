// Newline-delimited JSON over the local Unix socket between a PTY exec's control agent and its
// pty-attach process. Both ends are our own code on the same host; the socket lives in a 0700
// directory, so the launch message may carry the workload env (never a command line or file).
import type { Socket } from "node:net";
import { isInteger, isString, isUnknown, literal, object, variant, type Guard, type Infer } from "../../shared/guards.js";
import { onJsonLines } from "../../shared/json-lines.js";
import { RelayExit, RelayResized, RelaySpawnFailed, RelaySpawned, WORKLOAD_FIELDS } from "../terminal/relay-messages.js";

/** control agent → pty-attach: what to spawn (the workload env travels only here). */
export const LaunchLine = object({
  type: literal("launch"),
  ...WORKLOAD_FIELDS,
  tagPath: isString,
});
export type LaunchLine = Infer<typeof LaunchLine>;

/** control agent → pty-attach: confirm the terminal shows this size (a runtime `resize`). */
export const CheckSizeLine = object({ type: literal("check-size"), id: isInteger, rows: isInteger, cols: isInteger });
export type CheckSizeLine = Infer<typeof CheckSizeLine>;

// pty-attach → control agent: the same status messages as the terminal relay's (spawned,
// spawn-failed, resized: the answer to `check-size`, exit), declared once in relay-messages.ts.

export const isControlLine = variant("type", { launch: LaunchLine, "check-size": CheckSizeLine });
export type ControlLine = Infer<typeof isControlLine>;

export const isAttachLine = variant("type", {
  spawned: RelaySpawned,
  "spawn-failed": RelaySpawnFailed,
  resized: RelayResized,
  exit: RelayExit,
});
export type AttachLine = Infer<typeof isAttachLine>;

export function sendLine(sock: Socket, msg: ControlLine | AttachLine): void {
  if (!sock.destroyed) sock.write(JSON.stringify(msg) + "\n");
}

/**
 * The launch line carries the workload env: a large one is several MiB (fd3 takes 16 MiB), so the
 * bound is generous; it only stops a peer that never sends a newline.
 */
const MAX_ATTACH_LINE = 64 * 1024 * 1024;

/** Calls `handle` for each line that passes `guard`; a line that is not JSON ends the connection. */
export function onLines<T>(sock: Socket, guard: Guard<T>, handle: (msg: T) => void): void {
  onJsonLines(sock, { maxLine: MAX_ATTACH_LINE, guard: isUnknown, onStop: () => sock.destroy() }, (msg) => {
    if (guard(msg)) handle(msg);
  });
}
