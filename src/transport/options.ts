// The runtime's own options: the opaque `options` object Paseo sends with every request (and that
// `doctor` reads from a flag). Validated strictly so a typo fails loudly with the key's name
// instead of silently connecting somewhere else.
import { homedir, userInfo } from "node:os";
import { resolve } from "node:path";
import * as z from "../contract/zod-mini.js";
import { RuntimeError } from "../shared/errors.js";

/** Expands a leading `~` / `~/` against the local home directory. */
export function expandLocalPath(p: string): string {
  if (p === "~") return homedir();
  if (p.startsWith("~/")) return resolve(homedir(), p.slice(2));
  return resolve(p);
}

// Some characters survive no quoting in every login shell: fish treats `\\` and `\'` as escapes
// inside single quotes, and csh expands `!` history references even there. Remote paths reject
// them along with newline and NUL.
const remotePathUnsafe = /[\n\r\0\\!]/;

// OpenSSH 9.6 refuses these in a host or user given on its command line (ssh.c's valid_hostname,
// valid_ruser): %h and %r expand unquoted into ProxyCommand, Match exec and the like, so the shell
// would run `$(…)`. Also a leading `-` (it would read as an option) and any control character.
const shellSpecial = /['`"$\\;&<>|(){}\s\p{Cc}]/u;
const hostUnsafe = (s: string) => s.startsWith("-") || s.includes(",") || shellSpecial.test(s);
const userUnsafe = (s: string) => s.startsWith("-") || shellSpecial.test(s);

const remoteRoot = z
  .string()
  .check(z.refine((s) => (s.startsWith("/") || s.startsWith("~/")) && s.length > 2 && !remotePathUnsafe.test(s)));
const absoluteRemotePath = z.string().check(z.refine((s) => s.startsWith("/") && !remotePathUnsafe.test(s)));
const localPath = z.string().check(
  z.minLength(1),
  z.refine((s) => !s.includes("\0")),
);
const expandedPath = z.pipe(localPath, z.transform(expandLocalPath));

/**
 * Field schemas: every key, its default and its normal form are declared here once (RuntimeOptions
 * is their output); each key also needs a line in EXPECTED below.
 */
export const runtimeOptionFields = {
  /** A host name, address or ssh_config Host alias. */
  host: z.string().check(
    z.trim(),
    z.minLength(1),
    z.refine((s) => !hostUnsafe(s)),
  ),
  port: z._default(z.int().check(z.gte(1), z.lte(65535)), 22),
  /** Default: the local user name. */
  user: z.pipe(
    z.optional(
      z.string().check(
        z.minLength(1),
        z.refine((s) => !userUnsafe(s)),
      ),
    ),
    z.transform((u) => u ?? userInfo().username),
  ),
  /** Absolute local path (`~` expanded). */
  identityFile: z.optional(expandedPath),
  /** Absolute local path (`~` expanded). */
  knownHostsFile: z.pipe(z._default(localPath, "~/.ssh/known_hosts"), z.transform(expandLocalPath)),
  /** Remote base directory as configured: absolute, or `~/…` expanded on the host. */
  root: z._default(remoteRoot, "~/.paseo-ssh"),
  remoteNode: z.optional(absoluteRemotePath),
  connectTimeoutMs: z._default(z.int().check(z.gte(100), z.lte(600_000)), 10_000),
  keepaliveIntervalMs: z._default(z.int().check(z.gte(0), z.lte(3_600_000)), 15_000),
  /** Share one SSH connection per host through the broker (false or PASEO_SSH_NO_BROKER=1: in-process). */
  broker: z._default(z.boolean(), true),
  /** The broker exits after this long without clients or channels. */
  brokerIdleMs: z._default(z.int().check(z.gte(1000), z.lte(86_400_000)), 60_000),
  /** Session channels one SSH connection may carry at once (OpenSSH MaxSessions). */
  maxSessions: z._default(z.int().check(z.gte(1), z.lte(1000)), 10),
  /** Absolute local path (`~` expanded); absent: ~/.ssh/config and the system file, as ssh reads them. */
  sshConfig: z.optional(z.union([expandedPath, z.literal(false)])),
  /** Lets `StrictHostKeyChecking accept-new` in ssh_config record an unknown host key. */
  acceptNewHostKeys: z._default(z.boolean(), false),
  /**
   * The host daemon exits after this long with no live exec and no conversation. It is shared by
   * every configuration of the same user and root: the one that starts it decides.
   */
  daemonIdleMs: z._default(z.int().check(z.gte(1000), z.lte(86_400_000)), 300_000),
  /**
   * How long a pipes exec whose link was lost stays alive on the host waiting for its wrapper to
   * re-attach. 0: a lost link ends the exec at once (its tree reaped after the 1 s abandonment grace).
   */
  reconnectGraceMs: z._default(z.int().check(z.gte(0), z.lte(86_400_000)), 600_000),
  /**
   * Servers the workspace's processes listen on are forwarded to the same port on the Paseo side's
   * loopback: true (every port), false (none), or the host ports to forward (at most 1000).
   */
  forwardPorts: z._default(
    z.union([z.boolean(), z.array(z.int().check(z.gte(1), z.lte(65_535))).check(z.minLength(1), z.maxLength(1000))]),
    true,
  ),
  /**
   * Forwards the Paseo side's ssh-agent (IdentityAgent, else SSH_AUTH_SOCK) to git in the
   * workspaces created with it, through the broker's connection; never into a workload's env.
   */
  forwardAgent: z._default(z.boolean(), false),
  /**
   * Git in the workspaces created with it asks the Paseo side's `git credential fill` for the
   * hosts of the workspace's own remotes (HTTPS pushes), through the broker; nothing on the host keeps them.
   */
  forwardGitCredentials: z._default(z.boolean(), false),
};

/** What each key must look like, phrased for the one-line error message. */
const EXPECTED: Record<keyof typeof runtimeOptionFields, string> = {
  host: "expected a non-empty host name, address or ssh_config alias without spaces, commas, a leading - or shell metacharacters",
  port: "expected an integer 1-65535",
  user: "expected a non-empty user name without spaces, a leading - or shell metacharacters",
  identityFile: "expected a path to a private key file",
  knownHostsFile: "expected a path to a known_hosts file",
  root: 'expected an absolute path or one starting with "~/" (no newline, NUL, backslash or !)',
  remoteNode: "expected the absolute path of node on the remote host (no newline, NUL, backslash or !)",
  connectTimeoutMs: "expected an integer number of milliseconds 100-600000",
  keepaliveIntervalMs: "expected an integer number of milliseconds 0-3600000 (0 disables keepalives)",
  broker: "expected true or false (false connects in-process, for debugging)",
  brokerIdleMs: "expected an integer number of milliseconds 1000-86400000",
  maxSessions: "expected the server's MaxSessions, an integer 1-1000",
  sshConfig: "expected the path of an ssh_config file, or false to ignore ssh_config files",
  acceptNewHostKeys: "expected true or false (true lets StrictHostKeyChecking accept-new record unknown host keys)",
  daemonIdleMs: "expected an integer number of milliseconds 1000-86400000",
  reconnectGraceMs: "expected an integer number of milliseconds 0-86400000 (0: a lost link ends the exec at once)",
  forwardPorts: "expected true, false, or a non-empty array of at most 1000 port numbers 1-65535",
  forwardAgent: "expected true or false (true lets git in new workspaces use the Paseo side's ssh-agent)",
  forwardGitCredentials:
    "expected true or false (true lets git in new workspaces ask the Paseo side's git credential helpers for the hosts of their remotes)",
};

const schema = z.strictObject(runtimeOptionFields);

/** Parsed runtime options: every default applied, local paths absolute. */
export type RuntimeOptions = z.output<typeof schema> & {
  /** Keys the options object named; these win over ssh_config. Absent: every key set here counts. */
  explicit?: string[];
};

/**
 * A runtime option refused, its key carried as a field: a pool entry renames it to where it was
 * written (`hosts[1].port`) without reading the message.
 */
export class OptionError extends RuntimeError {
  constructor(
    readonly key: string,
    private readonly problem: "Unknown" | "Missing" | "Invalid",
    private readonly detail = "",
  ) {
    super("input", `${problem} runtime option "${key}"${detail}`);
  }

  /** The option is not in the schema (as opposed to missing or invalid). */
  get unknown(): boolean {
    return this.problem === "Unknown";
  }

  /** The same refusal of the option named `key`. */
  renamed(key: string): OptionError {
    return new OptionError(key, this.problem, this.detail);
  }
}

export function parseRuntimeOptions(raw: unknown): RuntimeOptions {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new RuntimeError("input", "Runtime options must be a JSON object");
  }
  const parsed = z.safeParse(schema, raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    if (issue.code === "unrecognized_keys") {
      throw new OptionError(String(issue.keys[0]), "Unknown");
    }
    const key = String(issue.path[0]) as keyof typeof EXPECTED;
    const missing = (raw as Record<string, unknown>)[key] === undefined;
    throw new OptionError(key, missing ? "Missing" : "Invalid", `: ${EXPECTED[key] ?? issue.message}`);
  }
  return { ...parsed.data, explicit: Object.keys(raw) };
}
