// `doctor --options '<json>'` (or `--options-file <path>`): walks the whole path to a host one step
// at a time (TCP connect, host key, authentication, agent, host facts) and prints one line per
// step with its time, so a user sees exactly where a setup breaks. Exit 0 only if every step
// passes; otherwise the failing step's line, then the classified error and its class's exit code.
import { readFileSync } from "node:fs";
import { RuntimeError, oneLine } from "../../errors.js";
import { parseRuntimeOptions, type RuntimeOptions } from "../../options.js";
import { openHost, type SshHost } from "../../transport/ssh-host.js";
import type { ConnectStep } from "../../transport/ssh-connection.js";
import type { HostFacts as Facts } from "../../remote-agent/ops-system.js";
import type { CliOperation, OperationArgs } from "../operation.js";

function readOptions(flags: Record<string, string>): RuntimeOptions {
  const inline = flags.options;
  const file = flags["options-file"];
  if ((inline === undefined) === (file === undefined)) {
    throw new RuntimeError("input", "doctor needs exactly one of --options '<json>' or --options-file <path>");
  }
  let text = inline;
  if (file !== undefined) {
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new RuntimeError(
        "input",
        `Cannot read --options-file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text!);
  } catch (err) {
    throw new RuntimeError("input", `Runtime options are not valid JSON: ${oneLine((err as Error).message)}`);
  }
  return parseRuntimeOptions(raw);
}

function gib(bytes: number | null): string {
  return bytes === null ? "unknown" : `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
}

const STEP_NAMES: Record<ConnectStep | "agent" | "facts", string> = {
  tcp: "connect",
  "host-key": "host key verified",
  auth: "authenticated",
  agent: "agent",
  facts: "host facts",
};
const ORDER = ["tcp", "host-key", "auth", "agent", "facts"] as const;

const operation: CliOperation = {
  requiredFlags: [],
  optionalFlags: ["options", "options-file"],
  async run(args: OperationArgs, io) {
    const options = readOptions(args.flags);
    const line = (ok: boolean, step: (typeof ORDER)[number], ms: number, detail: string) =>
      io.stdout.write(`${ok ? "ok  " : "FAIL"} ${STEP_NAMES[step].padEnd(17)} ${String(Math.round(ms)).padStart(6)} ms  ${detail}\n`);
    let last = performance.now();
    const elapsed = () => {
      const now = performance.now();
      const ms = now - last;
      last = now;
      return ms;
    };
    const done = new Set<string>();
    const pass = (step: (typeof ORDER)[number], detail: string) => {
      done.add(step);
      line(true, step, elapsed(), detail);
    };

    let host: SshHost | undefined;
    try {
      host = await openHost(options, {
        onStep: (step, detail) => {
          if (step === "tcp") pass(step, `${detail} (TCP)`);
          if (step === "host-key") pass(step, `${detail} (known_hosts: ${options.knownHostsFile})`);
          if (step === "auth") pass(step, `${options.user} with ${detail}`);
        },
      });
      const agent = await host.openAgent();
      agent.end();
      const where = `${options.root}/agent/${host.bundle.hash}`;
      pass("agent", `${host.installs > 0 ? "installed" : "found"} agent ${host.bundle.hash} in ${where}`);
      const f = await host.call<Facts>({ op: "facts" });
      pass(
        "facts",
        `${f.os} ${f.arch}; node ${f.node} (${f.nodePath}); ${f.git ?? "git missing"}; ${gib(f.freeBytes)} free under ${f.root}`,
      );
      return 0;
    } catch (err) {
      const failed = ORDER.find((s) => !done.has(s)) ?? "facts";
      const cls = err instanceof RuntimeError ? err.errorClass : "remote";
      line(false, failed, elapsed(), `[${cls}]`);
      throw err;
    } finally {
      host?.close();
    }
  },
};
export default operation;
