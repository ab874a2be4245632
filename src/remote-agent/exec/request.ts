// Shapes of the exec conversation between runtime and agent. The runtime validated the Paseo
// envelope strictly already; the agent re-checks types here because it trusts no input.
import { RuntimeError } from "../../shared/errors.js";
import type { AgentRequest } from "../context.js";

/** Signals a runtime may forward or request; anything else is refused with `Unsupported signal`. */
export const EXEC_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"] as const;
export type ExecSignal = (typeof EXEC_SIGNALS)[number];

export function isExecSignal(v: unknown): v is ExecSignal {
  return typeof v === "string" && (EXEC_SIGNALS as readonly string[]).includes(v);
}

export type ExecStdio = { kind: "pipes" } | { kind: "pty"; rows: number; cols: number; term?: string };

export interface RunRequest {
  workspaceId: string;
  owner: string;
  execId: string;
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
  stdio: ExecStdio;
  /** Test-only (scenarios C1): delay publishing the identity by this many ms. */
  testDelayIdentityMs: number;
}

function nonEmpty(v: unknown, name: string): string {
  if (typeof v !== "string" || v === "") throw new RuntimeError("input", `exec request has no ${name}`);
  return v;
}

function isStringMap(v: unknown): v is Record<string, string> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === "string");
}

function positiveInt(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 1;
}

export function parseRunRequest(r: AgentRequest): RunRequest {
  const argv = r.argv;
  if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string")) {
    throw new RuntimeError("input", "exec request has no argv");
  }
  if (!isStringMap(r.env)) throw new RuntimeError("input", "exec request env must map strings to strings");
  if (r.cwd !== undefined && typeof r.cwd !== "string") throw new RuntimeError("input", "exec request cwd must be a string");
  const s = r.stdio as Record<string, unknown> | undefined;
  let stdio: ExecStdio;
  if (s?.kind === "pipes") stdio = { kind: "pipes" };
  else if (s?.kind === "pty" && positiveInt(s.rows) && positiveInt(s.cols)) {
    stdio = { kind: "pty", rows: s.rows, cols: s.cols, ...(typeof s.term === "string" ? { term: s.term } : {}) };
  } else if (s?.kind === "pty") throw new RuntimeError("input", "Invalid PTY size");
  else throw new RuntimeError("input", "exec request has an invalid stdio");
  const delay = r.testDelayIdentityMs;
  return {
    workspaceId: nonEmpty(r.workspaceId, "workspaceId"),
    owner: nonEmpty(r.owner, "owner"),
    execId: nonEmpty(r.execId, "execId"),
    argv: argv as string[],
    env: r.env,
    ...(typeof r.cwd === "string" ? { cwd: r.cwd } : {}),
    stdio,
    testDelayIdentityMs: typeof delay === "number" && delay > 0 ? Math.min(delay, 30_000) : 0,
  };
}

export function parseJson(payload: Buffer): Record<string, unknown> | null {
  try {
    const v = JSON.parse(payload.toString("utf8")) as unknown;
    return typeof v === "object" && v !== null ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** What a shell would say for a name it cannot find (the exec then exits 127). */
export function notFoundMessage(argv0: string): string {
  return `paseo-ssh-runtime: ${argv0}: command not found\n`;
}

/**
 * Refuses strings no process can receive: a NUL byte in argv or env, or an env name that is empty or
 * holds `=` (it would silently turn into another variable). Checked before launch so the refusal
 * is one clear line and the exec is recorded as refused.
 */
export function checkProcessStrings(argv: string[], env: Record<string, string>): void {
  argv.forEach((arg, i) => {
    if (arg.includes("\0")) throw new RuntimeError("input", `Invalid spawn envelope: argv[${i}] contains a NUL byte`);
  });
  for (const [name, value] of Object.entries(env)) {
    if (name === "" || name.includes("=") || name.includes("\0")) {
      throw new RuntimeError("input", `Invalid spawn envelope: env name ${JSON.stringify(name)} cannot be passed to a process`);
    }
    if (value.includes("\0")) throw new RuntimeError("input", `Invalid spawn envelope: env ${name} contains a NUL byte`);
  }
}
