// The rules of a resumable exec on the Paseo side, in one place: which execs get a resume token,
// the exec-link's lifecycle and the only transitions it may take, when a lost stream is re-attached
// and how often, when the reconnect grace has run out, which failures no retry can fix, how attach
// generations keep a broker's abandon from reaping an exec its wrapper came back to, and the
// messages a user sees when the exec cannot continue. exec-link.ts does the I/O these rules decide.
// The generation, grace and loss rules all three processes share, the daemon's session and the
// broker's client-gone queue are src/shared/exec-session-core.ts; the frame counting is
// src/shared/stream-replay.ts.
import { RuntimeError, type ErrorClass, type FailureCode } from "../shared/errors.js";
import { nextWrapperLinkState, type WrapperLinkEvent, type WrapperLinkState } from "../shared/exec-session-core.js";
export { currentChannel, stillReattaching } from "../shared/exec-session-core.js";
import { randomHex } from "../shared/random.js";
import type { AgentChannel } from "../transport/agent-channel.js";

export const RECONNECT_MIN_MS = 250;
export const RECONNECT_MAX_MS = 5000;

/** The next wait before re-attaching: doubling from RECONNECT_MIN_MS up to RECONNECT_MAX_MS, ±25 % jitter. */
export function reconnectDelay(attempt: number): number {
  const base = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** Math.min(attempt, 10));
  return Math.round(base * (0.75 + Math.random() * 0.5));
}

export function newResumeToken(): string {
  return randomHex(16);
}

/**
 * Whether an exec is offered a token at all: only with a grace to re-attach within. Whether it
 * keeps it depends on the host (`reattachable`: through the broker, which reconnects; not
 * in-process, whose one SSH connection is gone for good with the link).
 */
export function wantsResume(graceMs: number): boolean {
  return graceMs > 0;
}

/** The token an exec keeps: the one offered with the connect, if the host can re-attach later. */
export function keptToken(offered: string | null, reattachable: boolean): string | null {
  return offered !== null && reattachable ? offered : null;
}

/**
 * Whether the exec may re-attach after losing its stream. `dropped`: the exec runs on sshd's pty,
 * whose channel cannot outlive the link (the agent said `pty-token`).
 */
export type ResumeRight = { kind: "resumable"; token: string; graceMs: number } | { kind: "none" } | { kind: "dropped" };

export function resumeRight(token: string | null, graceMs: number): ResumeRight {
  return token !== null && wantsResume(graceMs) ? { kind: "resumable", token, graceMs } : { kind: "none" };
}

/** The exec-link's lifecycle over the wrapper's agent channels (the machine: src/shared/exec-session-core.ts). */
export type ExecLinkState = WrapperLinkState<AgentChannel>;
export type ExecLinkEvent = WrapperLinkEvent<AgentChannel>;
export const nextExecLinkState: (s: ExecLinkState, e: ExecLinkEvent) => ExecLinkState = nextWrapperLinkState;

/**
 * The next attempt's wait, or null when it would end past the grace (`deadline`): then the link
 * waits out the rest of the grace and gives up. The first attempt goes at once: a broker holds it
 * while the link is down and so sees the wrapper die, whereas between attempts nothing would tell
 * the daemon (the exec would outlive its wrapper by the whole grace). Later ones back off.
 */
export function nextAttemptDelay(attempt: number, deadline: number, now: number): number | null {
  const wait = attempt === 0 ? 0 : reconnectDelay(attempt - 1);
  return now + wait >= deadline ? null : wait;
}

/** Failures re-attaching cannot fix. */
const FATAL: ReadonlySet<ErrorClass> = new Set<ErrorClass>(["auth", "host-key", "ownership", "input"]);

export function isFatalAttachFailure(err: unknown): err is RuntimeError {
  return err instanceof RuntimeError && FATAL.has(err.errorClass);
}

/** The daemon's answers to exec.attach that say this exec cannot be resumed there, by code (never by text or class). */
const NOT_RESUMABLE: ReadonlySet<FailureCode> = new Set<FailureCode>(["unknown-exec", "replay-gap"]);

/**
 * What the daemon's `error` answer to exec.attach means: the daemon no longer knowing the exec, or
 * no longer holding what the wrapper lacks (fatal, named as such), a fatal class stays fatal,
 * anything else (another remote failure included) is worth another try.
 */
export function attachRefusal(err: RuntimeError, hostName: string): RuntimeError | string {
  if (err.code !== undefined && NOT_RESUMABLE.has(err.code)) {
    return new RuntimeError("remote", `the execution on ${hostName} could not be resumed: ${err.message}`, { code: err.code });
  }
  return FATAL.has(err.errorClass) ? err : err.message;
}

/** The stream was lost and the exec may not re-attach. */
export function lostError(right: ResumeRight, hostName: string): RuntimeError {
  // The broker closes a stream that carries a token without naming the loss (it expects a
  // re-attachment), so an exec that dropped its token names the host and why it cannot resume.
  return new RuntimeError(
    "network",
    right.kind === "dropped"
      ? `connection to ${hostName} was lost; a terminal on sshd's pty cannot outlive its SSH connection`
      : "connection to the remote agent was lost",
  );
}

/** A pool's exec whose first stream was lost before the daemon answered (failFastUntilHeard). */
export function silentAtStartError(hostName: string): RuntimeError {
  return new RuntimeError(
    "network",
    `connection to ${hostName} was lost before the host answered the execution request; if it started there, it is stopped once the host is back`,
  );
}

/** No re-attachment worked within the grace. `last`: why the last attempt failed ("" if none was made). */
export function graceExpiredError(hostName: string, graceMs: number, last: string): RuntimeError {
  return new RuntimeError(
    "network",
    `connection to ${hostName} was lost and not re-established within reconnectGraceMs (${graceMs} ms); the execution was stopped on the host${last ? ` (last attempt: ${last})` : ""}`,
  );
}
