// Every failure the runtime reports is a RuntimeError with a class, so the CLI can print one
// actionable line and exit with a stable, documented code (see README "Errors").
import { isString, literal, object, optional, type Guard, type Infer } from "./guards.js";

export type ErrorClass = "input" | "auth" | "host-key" | "network" | "remote-dependency" | "ownership" | "not-ready" | "remote";

/** Stable exit codes per class; documented in the README. */
export const EXIT_CODES: Record<ErrorClass, number> = {
  remote: 1,
  input: 2,
  auth: 3,
  "host-key": 4,
  network: 5,
  "remote-dependency": 6,
  ownership: 7,
  // Contract: `signal` before `started` exits 75 ("execution identity is not ready").
  "not-ready": 75,
};

/**
 * Our own failures that other code acts on, named so that nothing recognises them by their text
 * (the message stays for the user). They travel with the error across the agent and broker wires.
 */
export const FAILURE_CODES = [
  /** requireSpace refused before writing. */
  "disk-short",
  /** The disk filled up part-way (ranOutOfSpace). */
  "disk-ran-out",
  /** A git child exited non-zero or was killed (gitFailure). */
  "git-failed",
  /** A git child failed because its directory is in no repository (gitFailure). */
  "git-not-a-repository",
  /** git could not be started. */
  "git-missing",
  /** exec.attach: the host daemon does not know the exec (reaped after its grace, or the daemon restarted). */
  "unknown-exec",
  /** exec.attach: the daemon no longer holds the frames the wrapper lacks (the exec cannot resume). */
  "replay-gap",
] as const;
export type FailureCode = (typeof FAILURE_CODES)[number];

export class RuntimeError extends Error {
  readonly errorClass: ErrorClass;
  readonly code: FailureCode | undefined;
  constructor(errorClass: ErrorClass, message: string, options?: { cause?: unknown; code?: FailureCode }) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = "RuntimeError";
    this.errorClass = errorClass;
    this.code = options?.code;
  }
  get exitCode(): number {
    return EXIT_CODES[this.errorClass];
  }
}

const isErrorClass: Guard<ErrorClass> = (v): v is ErrorClass => typeof v === "string" && Object.hasOwn(EXIT_CODES, v);

/** The fields of a failure on the agent and broker wires (an `error` frame, a broker's answer). */
export const WIRE_ERROR_FIELDS = { errorClass: isErrorClass, message: isString, code: optional(literal(...FAILURE_CODES)) };
export const WireError = object(WIRE_ERROR_FIELDS);
export type WireError = Infer<typeof WireError>;

export function toWireError(err: unknown): WireError {
  if (err instanceof RuntimeError) {
    return { errorClass: err.errorClass, message: err.message, ...(err.code !== undefined ? { code: err.code } : {}) };
  }
  return { errorClass: "remote", message: oneLine(err instanceof Error ? err.message : String(err)) };
}

export function fromWireError(w: WireError): RuntimeError {
  return new RuntimeError(w.errorClass, w.message, w.code !== undefined ? { code: w.code } : undefined);
}

export function oneLine(text: string): string {
  return text.trim().replace(/\s*\n\s*/g, "; ");
}
