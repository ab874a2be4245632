// Checks an `exec.run` request on the agent. The runtime validated the Paseo envelope strictly
// already; the agent re-checks types here because it trusts no input.
import { RuntimeError } from "../../shared/errors.js";
import { arrayOf, isPositiveInt, isRecord, isString, recordOf, windowDimension } from "../../shared/guards.js";
import type { ExecRunRequest, ExecStdio } from "../../shared/agent-api.js";
import type { ReceivedRequest } from "../context.js";

function nonEmpty(v: unknown, name: string): string {
  if (typeof v !== "string" || v === "") throw new RuntimeError("input", `exec request has no ${name}`);
  return v;
}

const isArgv = arrayOf(isString);
const isStringMap = recordOf(isString);

function parseStdio(s: unknown): ExecStdio {
  if (!isRecord(s)) throw new RuntimeError("input", "exec request has an invalid stdio");
  if (s.kind === "pipes") return { kind: "pipes" };
  if (s.kind !== "pty") throw new RuntimeError("input", "exec request has an invalid stdio");
  if (!isPositiveInt(s.rows) || !isPositiveInt(s.cols)) throw new RuntimeError("input", "Invalid PTY size");
  const size = { rows: windowDimension(s.rows), cols: windowDimension(s.cols) };
  return { kind: "pty", ...size, ...(typeof s.term === "string" ? { term: s.term } : {}) };
}

export function parseRunRequest(r: ReceivedRequest): ExecRunRequest {
  const argv = r.argv;
  if (!isArgv(argv) || argv.length === 0) throw new RuntimeError("input", "exec request has no argv");
  if (!isStringMap(r.env)) throw new RuntimeError("input", "exec request env must map strings to strings");
  if (r.cwd !== undefined && typeof r.cwd !== "string") throw new RuntimeError("input", "exec request cwd must be a string");
  const stdio = parseStdio(r.stdio);
  return {
    workspaceId: nonEmpty(r.workspaceId, "workspaceId"),
    owner: nonEmpty(r.owner, "owner"),
    execId: nonEmpty(r.execId, "execId"),
    argv,
    env: r.env,
    ...(typeof r.cwd === "string" ? { cwd: r.cwd } : {}),
    stdio,
  };
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
