// The shape every CLI operation module implements. The dispatcher (dispatch.ts) parses argv strictly,
// then calls `run`; a thrown RuntimeError becomes one stderr line and its class's exit code.
import type { Readable, Writable } from "node:stream";

export interface OperationArgs {
  /** Flag values by name without the leading dashes, e.g. `workspace-id`. */
  flags: Record<string, string>;
  /** Arguments the daemon config placed before the operation word (ours to interpret). */
  leading: string[];
}

export interface OperationIO {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
  /**
   * Set when stdout is this process's own fd (the dispatcher's io): an operation whose whole output
   * is one short constant may write it there at once (write-bytes.ts) without making `stdout`.
   */
  stdoutFd?: number;
}

export interface CliOperation {
  /** Flags this operation requires, by name (`workspace-id`, …). */
  requiredFlags: string[];
  /** Further flags it accepts. */
  optionalFlags?: string[];
  /** Returns the process exit code (default 0). */
  run(args: OperationArgs, io: OperationIO): Promise<number | void>;
}
