// Where a host configuration's broker lives and how it is recognised: one private directory per
// user (0700, ours, or it is not used), one socket per configuration key, and a version that
// changes with every build so an old broker is never trusted by a new client.
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { RuntimeOptions } from "../../transport/options.js";
import type { ConnectionPlan } from "../../transport/ssh-config/resolve.js";
import { sha256Hex } from "../../shared/sha256.js";

/** Bumped when the wire protocol (wire.ts) changes shape. */
export const BROKER_PROTOCOL = 1;

function uid(): number {
  return process.getuid?.() ?? 0;
}

/** dist/broker.js, found from dist/cli.js, a dist/cli-chunks/ chunk, or src/broker/common/ under tests. */
export function brokerScriptPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, "broker.js"), join(here, "..", "broker.js"), join(here, "..", "..", "..", "dist", "broker.js")];
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`broker bundle missing next to ${here} (run npm run build)`);
  return found;
}

/** The hash of dist/broker.js that a build embeds in the operations it builds beside it (scripts/build.mjs). */
declare const __BROKER_SCRIPT_HASH__: string | undefined;

/**
 * Version = protocol + hash of dist/broker.js. Its imports name content-hashed chunks, so any code
 * change in the broker or what it bundles changes it; client and broker compute it the same way.
 */
export function brokerVersion(script = brokerScriptPath()): string {
  return `${BROKER_PROTOCOL}-${sha256Hex(readFileSync(script)).slice(0, 16)}`;
}

/**
 * The version of the broker built with this code, without reading and hashing the script on every
 * start; null outside a build (tests run the sources), where brokerVersion reads the file.
 */
export function builtBrokerVersion(): string | null {
  return typeof __BROKER_SCRIPT_HASH__ === "string" ? `${BROKER_PROTOCOL}-${__BROKER_SCRIPT_HASH__}` : null;
}

/**
 * What identifies one shared connection: everything that changes where or how we connect. With a
 * resolved hop chain that is the chain itself (so an ssh_config edit, or a different jump host,
 * means another broker), otherwise the options that name the host.
 */
export function brokerKey(options: RuntimeOptions, version: string, plan?: ConnectionPlan): string {
  const material = {
    version,
    ...(plan
      ? { hops: plan.hops.map(({ sources: _sources, ...hop }) => hop) }
      : {
          host: options.host,
          port: options.port,
          user: options.user,
          identityFile: options.identityFile ?? null,
          knownHostsFile: options.knownHostsFile,
        }),
    root: options.root,
    remoteNode: options.remoteNode ?? null,
    connectTimeoutMs: options.connectTimeoutMs,
    keepaliveIntervalMs: options.keepaliveIntervalMs,
    brokerIdleMs: options.brokerIdleMs,
    maxSessions: options.maxSessions,
    daemonIdleMs: options.daemonIdleMs,
    // The broker holds the forwards: configurations that forward differently are brokers apart.
    forwardPorts: options.forwardPorts,
    // A broker forwarding the agent is another connection than one that does not.
    forwardAgent: options.forwardAgent,
    // Only a broker started with the option answers the host's credential requests.
    forwardGitCredentials: options.forwardGitCredentials,
    agentSocket: process.env.SSH_AUTH_SOCK ?? null,
  };
  return sha256Hex(JSON.stringify(material)).slice(0, 24);
}

/** A directory is usable only if it is a real directory, ours, and closed to everyone else. */
function trustworthy(dir: string): boolean {
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== uid()) return false;
  if ((st.mode & 0o077) !== 0) {
    // Ours but too open (e.g. created under a loose umask): tighten it rather than trust it.
    chmodSync(dir, 0o700);
    return (lstatSync(dir).mode & 0o077) === 0;
  }
  return true;
}

/** Where brokers may live, in the order they are tried (see brokerDir). */
export function brokerDirCandidates(where: { xdgRuntimeDir?: string | undefined; tmp: string }): string[] {
  const xdg = where.xdgRuntimeDir;
  const base = xdg && existsSync(xdg) ? join(xdg, "paseo-ssh") : join(where.tmp, `paseo-ssh-${uid()}`);
  return [base, ...[1, 2, 3, 4].map((i) => `${base}.${i}`)];
}

/** Characters of a broker's socket name: the 24-hex-digit key and ".sock" (brokerKey, brokerPaths). */
const SOCKET_NAME_LENGTH = 24 + ".sock".length;

/**
 * Whether a broker socket in `dir` fits a Unix socket address on `platform`: sun_path holds 108
 * bytes on Linux but 104 on macOS and the BSDs, with its NUL. A macOS TMPDIR
 * (/var/folders/xx/…/T/, about 50 bytes) fits; a much longer one would make every broker start fail.
 */
export function socketPathFits(dir: string, platform: NodeJS.Platform = process.platform): boolean {
  const max = (platform === "linux" ? 108 : 104) - 1;
  return Buffer.byteLength(join(dir, "k".repeat(SOCKET_NAME_LENGTH))) <= max;
}

/**
 * The per-user broker directory: $XDG_RUNTIME_DIR/paseo-ssh or <tmpdir>/paseo-ssh-<uid>. If a
 * squatter owns that name, numbered alternatives are tried in a fixed order so every process of
 * ours agrees on one; null when none is usable (the caller then connects in-process), which is
 * also the case where its sockets' paths would be too long for this OS.
 */
export function brokerDir(): string | null {
  for (const dir of brokerDirCandidates({ xdgRuntimeDir: process.env.XDG_RUNTIME_DIR, tmp: tmpdir() })) {
    if (!socketPathFits(dir)) continue;
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") continue;
    }
    try {
      if (trustworthy(dir)) return dir;
    } catch {
      // Vanished or unreadable: try the next name.
    }
  }
  return null;
}

/**
 * The user's private state directory ($XDG_STATE_HOME/paseo-ssh, else ~/.local/state/paseo-ssh),
 * for what must not silently go missing when every brokerDir name was squatted in a shared TMPDIR
 * (a pool's placement records): nobody else can create names under the user's home. Null when it
 * cannot be made ours and private.
 */
export function privateStateDir(env: NodeJS.ProcessEnv = process.env): string | null {
  const xdg = env.XDG_STATE_HOME;
  const home = env.HOME || homedir();
  const base = xdg && isAbsolute(xdg) ? xdg : home ? join(home, ".local", "state") : null;
  if (base === null) return null;
  const dir = join(base, "paseo-ssh");
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    return trustworthy(dir) ? dir : null;
  } catch {
    return null;
  }
}

export interface BrokerPaths {
  dir: string;
  socket: string;
  lock: string;
  log: string;
}

export function brokerPaths(dir: string, key: string): BrokerPaths {
  return { dir, socket: join(dir, `${key}.sock`), lock: join(dir, `${key}.lock`), log: join(dir, `${key}.log`) };
}

/** A socket file we may connect to: a socket, ours, not group/world accessible. */
export function socketTrustworthy(path: string): boolean {
  const st = lstatSync(path);
  return st.isSocket() && st.uid === uid() && (st.mode & 0o077) === 0;
}
