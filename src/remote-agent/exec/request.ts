// Checks an `exec.run` request on the agent against its one schema (ExecRunRequest in
// src/shared/agent-api.ts). The runtime validated the Paseo envelope strictly already; the agent
// re-checks types here because it trusts no input.
import { RuntimeError } from "../../shared/errors.js";
import { isRecord, parse, windowDimension } from "../../shared/guards.js";
import { ExecRunRequest } from "../../shared/agent-api.js";
import type { ReceivedRequest } from "../context.js";

/** The request checked against its schema (the first failing field's line), PTY sizes clamped. */
export function parseRunRequest(r: ReceivedRequest): ExecRunRequest {
  // A terminal type that is not a string is dropped, not refused.
  const stdio =
    isRecord(r.stdio) && r.stdio.term !== undefined && typeof r.stdio.term !== "string" ? { ...r.stdio, term: undefined } : r.stdio;
  const req = { ...r, stdio };
  const checked = parse(ExecRunRequest, req, (why) => new RuntimeError("input", why ?? "exec request is malformed"));
  const { workspaceId, owner, execId, argv, env, cwd, stdio: s } = checked;
  return {
    workspaceId,
    owner,
    execId,
    argv,
    env,
    ...(cwd !== undefined ? { cwd } : {}),
    ...(checked.resume !== undefined ? { resume: checked.resume } : {}),
    stdio:
      s.kind === "pipes"
        ? { kind: "pipes" }
        : { kind: "pty", rows: windowDimension(s.rows), cols: windowDimension(s.cols), ...(s.term !== undefined ? { term: s.term } : {}) },
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
