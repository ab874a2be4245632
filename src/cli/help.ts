// `--help` for the executable and every operation (`paseo-ssh-runtime --help`, `help <op>`,
// `<op> --help`): usage, flags and an example on stdout, exit 0. Kept apart from the dispatcher so
// the strict contract parsing of lifecycle operations stays untouched by help handling.
import type { OperationName } from "./ops/registry.js";

interface OperationHelp {
  summary: string;
  /** Everything after the operation word. */
  usage: string;
  flags: Array<[flag: string, description: string]>;
  /** How the operation is fed and what it prints, beyond the flags. */
  notes?: string[];
  example: string;
}

const LIFECYCLE_STDIN =
  "Reads Paseo's lifecycle request (JSON: protocolVersion, runtimeInstanceId, options, …) on stdin; answers one JSON line on stdout.";
const WORKSPACE_ID: [string, string] = ["--workspace-id <id>", "the workspace to act on (must equal input.workspaceId when given)"];
const REQUEST = `'{"protocolVersion":1,"runtimeInstanceId":"<64 hex>","options":{"host":"buildbox"}}'`;

function lifecycle(summary: string, op: string, extraFlags: Array<[string, string]> = []): OperationHelp {
  return {
    summary,
    usage: "--workspace-id <id>" + extraFlags.map(([f]) => ` ${f}`).join(""),
    flags: [WORKSPACE_ID, ...extraFlags],
    notes: [LIFECYCLE_STDIN],
    example: `echo ${REQUEST} | paseo-ssh-runtime ${op} --workspace-id ws-1`,
  };
}

const HELP: Record<OperationName, OperationHelp> = {
  describe: {
    summary: "Print the protocol version and the exec modes this runtime speaks.",
    usage: "",
    flags: [],
    notes: ["Takes no flags and never reads stdin."],
    example: "paseo-ssh-runtime describe",
  },
  create: lifecycle("Create (materialize) a workspace on the remote host from the request's input.", "create"),
  inspect: lifecycle("Print a workspace's durable state, read from its remote manifest.", "inspect"),
  exec: {
    ...lifecycle("Run one process in a workspace (fd0-fd4 exec protocol; pipes or PTY).", "exec"),
    notes: ["Reads the exec request on stdin; fd3 carries control messages, fd4 the lifecycle events (started, exited)."],
  },
  signal: {
    summary: "Signal one exec's remote process tree; exits 0 once it is gone.",
    usage: "--workspace-id <id> --exec-id <id> --signal <SIG>",
    flags: [WORKSPACE_ID, ["--exec-id <id>", "the exec to signal"], ["--signal <SIG>", "signal name, e.g. TERM, INT, KILL"]],
    notes: [LIFECYCLE_STDIN],
    example: `echo ${REQUEST} | paseo-ssh-runtime signal --workspace-id ws-1 --exec-id e-1 --signal TERM`,
  },
  pause: lifecycle("Freeze a workspace's processes (SIGSTOP) and mark it paused.", "pause"),
  resume: lifecycle("Continue a paused workspace's processes and mark it ready.", "resume"),
  "release-backing": lifecycle("Remove a paused workspace's backing directory.", "release-backing"),
  "merge-to-base": lifecycle("Bring the workspace's commits back and fast-forward its base branch.", "merge-to-base"),
  destroy: lifecycle("Kill a workspace's processes and remove its directory (idempotent).", "destroy"),
  reconcile: {
    summary: "Remove this runtime instance's workspaces that Paseo no longer knows (orphans).",
    usage: "",
    flags: [],
    notes: [
      LIFECYCLE_STDIN.replace("…", "workspaceIds, …"),
      "A leading --verbose (or PASEO_SSH_VERBOSE=1) reports each removal on stderr.",
    ],
    example: `echo '{"protocolVersion":1,"runtimeInstanceId":"<64 hex>","options":{"host":"buildbox"},"workspaceIds":["ws-1"]}' | paseo-ssh-runtime reconcile`,
  },
  doctor: {
    summary: "Check every step to a host, or to each host of a pool (config resolution, each hop: TCP, host key, auth; agent; host facts).",
    usage: "(--options '<json>' | --options-file <path>)",
    flags: [
      ["--options '<json>'", "the runtime options Paseo would send, as JSON"],
      ["--options-file <path>", "the same, read from a file"],
    ],
    notes: ["Prints one line per step with its time; exit 0 only if every step passes."],
    example: `paseo-ssh-runtime doctor --options '{"host":"buildbox"}'`,
  },
  status: {
    summary: "One row per host of the pool: reachable, load per CPU, free disk, memory, workspaces, live execs, cordoned.",
    usage: "(--options '<json>' | --options-file <path>) [--json true]",
    flags: [
      ["--options '<json>'", "the runtime options Paseo would send (a single host or a pool), as JSON"],
      ["--options-file <path>", "the same, read from a file"],
      ["--json true", "one JSON object per host instead of the table"],
    ],
    notes: ["Asks every host at once; exit 0 only if every host answered."],
    example: `paseo-ssh-runtime status --options '{"hosts":[{"host":"box1"},{"host":"box2"}]}'`,
  },
  config: {
    summary: "Print the workspaceRuntimes entry to paste into Paseo's config.json.",
    usage:
      "--host <[user@]host[:port] | ssh_config alias> [--id ssh] [--identity-file <path>] [--known-hosts-file <path>] [--ssh-config <path>] [--root <dir>] [--remote-node <path>] [--label <text>] [--doctor true]",
    flags: [
      ["--host <spec>", "[user@]host[:port], or a Host alias from ~/.ssh/config (kept as the alias)"],
      ["--id <id>", "runtime id in Paseo's config (default ssh)"],
      ["--identity-file <path>", "private key to use instead of the ssh_config / default keys"],
      ["--known-hosts-file <path>", "known_hosts file to verify the host key against"],
      ["--ssh-config <path>", "ssh_config file to read (default ~/.ssh/config and the system file; false: none)"],
      ["--root <dir>", "remote base directory (default ~/.paseo-ssh)"],
      ["--remote-node <path>", "absolute path of node on the host"],
      ["--label <text>", "label shown by Paseo"],
      ["--doctor true", "run doctor first (its report goes to stderr)"],
    ],
    example: "paseo-ssh-runtime config --host buildbox --doctor true",
  },
  demo: {
    summary: "A guided tour: create, exec, pause, resume and destroy a workspace.",
    usage: "[--host [user@]host[:port] [--identity-file <path>] [--known-hosts-file <path>] [--root <dir>]]",
    flags: [
      ["--host <spec>", "a real host to tour (default: an embedded SSH server on 127.0.0.1)"],
      ["--identity-file <path>", "private key for --host"],
      ["--known-hosts-file <path>", "known_hosts file for --host"],
      ["--root <dir>", "remote base directory for --host"],
    ],
    example: "paseo-ssh-runtime demo",
  },
  processes: lifecycle("List a workspace's live remote processes as one JSON line (diagnostic).", "processes"),
  ports: lifecycle("List the host ports a workspace's processes listen on and where each is forwarded here, as one JSON line.", "ports"),
  adopt: {
    ...lifecycle("Re-own a workspace after the Paseo home moved.", "adopt", [
      ["--from-paseo-home <path>", "the Paseo home the workspace was created under"],
      ["--from-runtime-instance-id <hex>", "or the old runtime instance id itself"],
    ]),
    usage: "--workspace-id <id> (--from-paseo-home <path> | --from-runtime-instance-id <hex>)",
  },
  work: lifecycle("Bring a workspace's commits back into the local repository now and print where they are (one JSON line).", "work"),
  "work-notice": {
    summary: "Internal: the broker runs it when the host reports that a workspace's refs moved (the live mirror).",
    usage: "",
    flags: [],
    notes: ["Reads {options, target, notice} on stdin from the broker; not for use by hand."],
    example: `echo '{"options":{…},"target":{…},"notice":{…}}' | paseo-ssh-runtime work-notice`,
  },
  "git-credential": {
    summary: "Internal: the broker runs it when git in a workspace asks for a credential (forwardGitCredentials).",
    usage: "",
    flags: [],
    notes: ["Reads {options, target, ask} on stdin from the broker and prints the answer on stdout; not for use by hand."],
    example: `echo '{"options":{…},"target":{…},"ask":{…}}' | paseo-ssh-runtime git-credential`,
  },
};

export function operationHelp(name: OperationName): string {
  const h = HELP[name];
  const lines = [`Usage: paseo-ssh-runtime ${name}${h.usage ? ` ${h.usage}` : ""}`, "", h.summary, ""];
  if (h.flags.length > 0) {
    lines.push("Flags:");
    const width = Math.max(...h.flags.map(([f]) => f.length));
    for (const [flag, description] of h.flags) lines.push(`  ${flag.padEnd(width)}  ${description}`);
    lines.push("");
  }
  for (const note of h.notes ?? []) lines.push(note);
  if (h.notes?.length) lines.push("");
  lines.push("Example:", `  ${h.example}`, "");
  return lines.join("\n");
}

export function programHelp(): string {
  const names = Object.keys(HELP) as OperationName[];
  const width = Math.max(...names.map((n) => n.length));
  return [
    "Usage: paseo-ssh-runtime <operation> [--flag value]...",
    "       paseo-ssh-runtime help <operation>   (or <operation> --help)",
    "",
    "A Paseo workspace runtime that runs each workspace on a remote machine over SSH. Paseo spawns it",
    "once per operation with the runtime options in its request; hosts are reached as `ssh` reaches",
    "them (~/.ssh/config aliases, ProxyJump, ProxyCommand).",
    "",
    "Operations:",
    ...names.map((n) => `  ${n.padEnd(width)}  ${HELP[n].summary}`),
    "",
    "Example:",
    "  paseo-ssh-runtime config --host buildbox --doctor true",
    "",
  ].join("\n");
}

const HELP_FLAGS = new Set(["--help", "-h"]);

/**
 * The help text argv asks for, or null when it asks for none. `--help` counts only where a flag may
 * stand (not as another flag's value), so strict parsing of real requests is unchanged.
 */
export function helpRequest(argv: string[], isOperation: (w: string) => w is OperationName): string | null {
  const at = argv.findIndex(isOperation);
  if (at < 0) {
    if (argv.some((w) => HELP_FLAGS.has(w)) || argv[argv.length - 1] === "help") return programHelp();
    return null;
  }
  const name = argv[at] as OperationName;
  if (argv[at - 1] === "help") return operationHelp(name);
  const rest = argv.slice(at + 1);
  for (let i = 0; i < rest.length; i += 2) if (HELP_FLAGS.has(rest[i]!)) return operationHelp(name);
  return null;
}
