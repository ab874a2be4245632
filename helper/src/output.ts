// stdout carries protocol data only and stderr one diagnostic line (docs/contract.md#helper-output); exiting must not
// lose bytes still queued for a pipe, so every exit goes through `exitAfterFlush`.

export const PROTOCOL_VERSION = 1;

/** One JSON result line; `protocolVersion` first, then the result's keys in their given order. */
export function resultLine(result: object): string {
  return `${JSON.stringify({ protocolVersion: PROTOCOL_VERSION, ...result })}\n`;
}

export function writeResult(result: object): void {
  process.stdout.write(resultLine(result));
}

export function errorMessage(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.replace(/\s*\n\s*/g, " ").trim() || "Workspace helper failed";
}

function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.destroyed || !stream.writable) return Promise.resolve();
  // An empty write's callback runs once everything queued before it has been handed to the OS.
  return new Promise((resolve) => stream.write("", () => resolve()));
}

let exiting = false;

/** Exits with `code` once stdout and stderr are drained; later calls are no-ops. */
export function exitAfterFlush(code: number): void {
  if (exiting) return;
  exiting = true;
  process.exitCode = code;
  // Unbounded on purpose: a reader that stops draining is Paseo's to cancel (by SIGTERM), and
  // exiting early would silently truncate fs-read data.
  void Promise.all([flushed(process.stdout), flushed(process.stderr)]).then(() => process.exit(code));
}

/** Hard error (docs/contract.md#helper-output): one stderr line, exit 1, nothing more on stdout. */
export function failHard(err: unknown): void {
  if (exiting) return;
  process.stderr.write(`${errorMessage(err)}\n`);
  exitAfterFlush(1);
}
