// `doctor --options '<json>'` (or `--options-file <path>`): walks the whole path to a host one step
// at a time (ssh_config resolution with the resolved hop chain and the config lines behind it;
// per hop TCP connect, host key, authentication; agent, host facts) and prints one line per step
// with its time, so a user sees exactly where a setup breaks. Exit 0 only if every step
// passes; otherwise the failing step's line, then the classified error and its class's exit code.
import { RuntimeError, oneLine } from "../../shared/errors.js";
import { readOptionsFlag } from "../options-flag.js";
import { isPoolOptions } from "../../workspace/pool/detect.js";
import { parseRuntimeOptions, type RuntimeOptions } from "../../transport/options.js";
import { connectSshHost, type SshHost } from "../../transport/ssh-host.js";
import type { ConnectStep } from "../../transport/ssh-connection.js";
import { resolvePlan, type ConnectionPlan } from "../../transport/ssh-config/resolve.js";
import type { CliOperation, OperationArgs, OperationIO } from "../operation.js";
import type { HostFacts } from "../../shared/agent-api.js";

/** Not a failure: LFS files then arrive as pointer files (docs/workspaces.md). */
const LFS_MISSING = "git-lfs missing (Git LFS files arrive as pointer files)";

function gib(bytes: number | null): string {
  return bytes === null ? "unknown" : `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
}

type Step = ConnectStep | "config" | "agent" | "facts" | "terminals" | "ports" | "forward" | "credentials";
const STEP_NAMES: Record<Step, string> = {
  config: "ssh_config",
  tcp: "connect",
  "host-key": "host key verified",
  auth: "authenticated",
  agent: "agent",
  facts: "host facts",
  terminals: "terminals",
  ports: "forwarded ports",
  forward: "ssh-agent forward",
  credentials: "git credentials",
};

/** The chain as doctor shows it: one line per hop, then the config lines its values came from. */
function describePlan(plan: ConnectionPlan): string[] {
  const lines: string[] = [];
  plan.hops.forEach((hop, i) => {
    const keys = hop.identityFiles.length > 0 ? hop.identityFiles.join(", ") : "none";
    const agent = hop.agentSocket ?? "none";
    const known = [...hop.userKnownHostsFiles, ...hop.globalKnownHostsFiles].join(", ");
    const only = hop.identitiesOnly ? " (IdentitiesOnly)" : "";
    const proxy = hop.proxyCommand !== undefined ? `, ProxyCommand ${hop.proxyCommand}` : "";
    lines.push(
      `     hop ${i + 1}/${plan.hops.length} ${hop.label}: ${hop.user}@${hop.host}:${hop.port}, key ${keys}${only}, agent ${agent}, known_hosts ${known}${hop.hostKeyAlias ? ` as ${hop.hostKeyAlias}` : ""}${proxy}`,
    );
    for (const [keyword, where] of Object.entries(hop.sources ?? {})) {
      for (const w of where) lines.push(`       ${keyword.padEnd(20)} ${w}`);
    }
  });
  return lines;
}

/**
 * Which way PTY execs get their terminal on this host: the host daemon owns it (an exec like any
 * other on the daemon's channel), or sshd does (one SSH channel per terminal, ending with it).
 */
export function terminalLine(t: HostFacts["terminal"]): string {
  if (t.method === "none") return `sshd's pty, one SSH channel per terminal that ends with it (${t.detail})`;
  return `owned by the host daemon via ${t.method === "python3" ? t.detail : `util-linux script (${t.detail})`}`;
}

/** Whether servers on the host will be reached here (README "Reaching servers on the host"). */
export function portsLine(options: RuntimeOptions, os: string, refused: string | null): string {
  if (options.forwardPorts === false) return "off (forwardPorts is false)";
  if (refused !== null) return `NOT forwarded: sshd refuses TCP forwarding (AllowTcpForwarding no?): ${refused}`;
  if (!os.startsWith("linux")) return `NOT detected: the host runs ${os.split(" ")[0]}; ports are read from Linux's /proc only`;
  return `detected and forwarded to this machine's loopback${Array.isArray(options.forwardPorts) ? ` (only ${options.forwardPorts.join(", ")})` : ""}`;
}

/**
 * forwardAgent: whether this host's sshd forwards the Paseo side's ssh-agent, tried on a session as
 * the broker asks for it. A refusal is a warning, not a failure: everything else works without it.
 */
async function forwardLine(host: SshHost, say: (verdict: "ok" | "warn", detail: string) => void): Promise<void> {
  try {
    const { ch, forwarded } = await host.holdAgent();
    ch.destroy();
    if (forwarded) say("ok", "forwarded: git in workspaces created with forwardAgent uses the Paseo side's ssh-agent");
    else say("warn", "no ssh-agent on the Paseo side (IdentityAgent or SSH_AUTH_SOCK) to forward: pushes use the host's own credentials");
  } catch (err) {
    say("warn", `refused by the host's sshd (AllowAgentForwarding no?): ${oneLine(err instanceof Error ? err.message : String(err))}`);
  }
}

/**
 * forwardGitCredentials: on for this host, and whether this side's `git credential` answers (what
 * git in the workspaces gets). Not a failure when it does not: only HTTPS pushes need it.
 */
async function credentialsLine(options: RuntimeOptions): Promise<{ ok: boolean; detail: string }> {
  if (!options.broker)
    return { ok: false, detail: "on, but not forwarded: the host's asks reach this side through the broker (broker: false)" };
  const { localCredentialCheck } = await import("../../workspace/forwarded-credentials.js");
  const c = await localCredentialCheck(process.cwd());
  return { ok: c.ok, detail: `forwarded for the hosts of each workspace's remotes; ${c.detail}` };
}

/** Every step to one host, one line each; throws the first failure (after its FAIL line). */
async function doctorHost(options: RuntimeOptions, io: OperationIO): Promise<void> {
  const line = (verdict: "ok" | "FAIL" | "warn", step: Step, ms: number, detail: string) =>
    io.stdout.write(`${verdict.padEnd(4)} ${STEP_NAMES[step].padEnd(17)} ${String(Math.round(ms)).padStart(6)} ms  ${detail}\n`);
  let last = performance.now();
  const elapsed = () => {
    const now = performance.now();
    const ms = now - last;
    last = now;
    return ms;
  };
  // The steps still expected, in order: each hop's connect, host key and authentication.
  let expected: Step[] = ["config", "tcp", "host-key", "auth", "agent", "facts", "terminals", "ports"];
  const pass = (step: Step, detail: string) => {
    if (expected[0] === step) expected = expected.slice(1);
    line("ok", step, elapsed(), detail);
  };

  let host: SshHost | undefined;
  try {
    const plan = await resolvePlan(options, { provenance: true });
    const hops = plan.hops.length;
    expected = ["config", ...plan.hops.flatMap((): Step[] => ["tcp", "host-key", "auth"]), "agent", "facts", "terminals", "ports"];
    pass("config", `via ${plan.via}${options.sshConfig ? ` (${options.sshConfig})` : ""}: ${plan.hops.map((h) => h.label).join(" -> ")}`);
    for (const l of describePlan(plan)) io.stdout.write(`${l}\n`);
    const tag = (i: number) => (hops > 1 ? `[hop ${i + 1}/${hops}] ` : "");
    host = await connectSshHost(
      options,
      {
        onStep: (step, detail, hop, i) => {
          if (step === "tcp") pass(step, `${tag(i)}${detail}${hop.proxyCommand === undefined && i === 0 ? " (TCP)" : ""}`);
          if (step === "host-key") pass(step, `${tag(i)}${detail}`);
          if (step === "auth") pass(step, `${tag(i)}${hop.user} with ${detail}`);
        },
      },
      plan,
    );
    const agent = await host.openAgent();
    agent.end();
    const where = `${options.root}/agent/${host.bundle.hash}`;
    pass("agent", `${host.installs > 0 ? "installed" : "found"} agent ${host.bundle.hash} in ${where}`);
    const f = await host.call("facts", {});
    pass(
      "facts",
      `${f.os} ${f.arch}; node ${f.node} (${f.nodePath}); ${f.git ?? "git missing"}; ${f.gitLfs ?? LFS_MISSING}; ${gib(f.freeBytes)} free under ${f.root}`,
    );
    pass("terminals", terminalLine(f.terminal));
    pass("ports", portsLine(options, f.os, await host.tcpForwardingRefused()));
    if (options.forwardAgent) await forwardLine(host, (verdict, detail) => line(verdict, "forward", elapsed(), detail));
    if (options.forwardGitCredentials) {
      const c = await credentialsLine(options);
      line(c.ok ? "ok" : "warn", "credentials", elapsed(), c.detail);
    }
  } catch (err) {
    const cls = err instanceof RuntimeError ? err.errorClass : "remote";
    line("FAIL", expected[0] ?? "facts", elapsed(), `[${cls}]`);
    throw err;
  } finally {
    host?.close();
  }
}

const operation: CliOperation = {
  requiredFlags: [],
  optionalFlags: ["options", "options-file"],
  async run(args: OperationArgs, io) {
    const raw = readOptionsFlag(args.flags, "doctor");
    if (!isPoolOptions(raw)) {
      await doctorHost(parseRuntimeOptions(raw), io);
      return 0;
    }
    // A pool: every host in turn (their lines must not interleave), then one verdict naming the failed ones.
    const { loadPool } = await import("../../workspace/pool/pool.js");
    const failed: Array<{ label: string; err: unknown }> = [];
    for (const entry of (await loadPool(raw)).entries) {
      io.stdout.write(`== ${entry.label}${entry.cordoned ? " (cordoned)" : ""}\n`);
      try {
        await doctorHost(entry.options, io);
      } catch (err) {
        failed.push({ label: entry.label, err });
        io.stdout.write(`     ${err instanceof Error ? err.message : String(err)}\n`);
      }
    }
    if (failed.length === 0) return 0;
    const first = failed[0]!.err;
    const cls = first instanceof RuntimeError ? first.errorClass : "remote";
    throw new RuntimeError(cls, `doctor: ${failed.length} host(s) of the pool failed: ${failed.map((f) => f.label).join(", ")}`);
  },
};
export default operation;
