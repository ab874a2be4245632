// Every failure the runtime reports is a RuntimeError with a class, so the CLI can print one
// actionable line and exit with a stable, documented code (see README "Errors").

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

export class RuntimeError extends Error {
  readonly errorClass: ErrorClass;
  constructor(errorClass: ErrorClass, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "RuntimeError";
    this.errorClass = errorClass;
  }
  get exitCode(): number {
    return EXIT_CODES[this.errorClass];
  }
}

/** Serializable form used on the agent wire. */
export interface WireError {
  errorClass: ErrorClass;
  message: string;
}

export function toWireError(err: unknown): WireError {
  if (err instanceof RuntimeError) return { errorClass: err.errorClass, message: err.message };
  return { errorClass: "remote", message: oneLine(err instanceof Error ? err.message : String(err)) };
}

export function fromWireError(w: WireError): RuntimeError {
  return new RuntimeError(w.errorClass, w.message);
}

export function oneLine(text: string): string {
  return text.trim().replace(/\s*\n\s*/g, "; ");
}
