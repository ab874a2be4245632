// One authenticated ssh2 connection, possibly through jump hosts or a ProxyCommand: our own TCP
// socket (TCP_NODELAY before the handshake, so small frames are not delayed by Nagle), strict
// known_hosts checking of every hop before any authentication to it, public-key auth, bounded
// timeouts, and classified errors naming the hop. Everything ssh2-specific lives here so the
// per-host broker can own connections without touching SshHost's bootstrap logic.
import { connect as netConnect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
// ssh2 is CommonJS: Node's ESM loader only offers its default export (the broker and the tests
// run as ES modules).
import ssh2 from "ssh2";
import type { Client, ClientChannel, ExecOptions, PseudoTtyOptions } from "ssh2";
import { RuntimeError, oneLine } from "../shared/errors.js";
import { sleep } from "../shared/async.js";
import type { RuntimeOptions } from "./options.js";
import { planAuth } from "./auth.js";
import { classifySshError, networkError } from "./classify.js";
import { knownKeyTypes, loadKnownHostsFiles, recordHostKey, verifyHostKey } from "./known-hosts.js";
import { forwardThrough, startProxyCommand, type ProxyProcess } from "./proxy.js";
import { resolvePlan, type ConnectionPlan, type Hop } from "./ssh-config/resolve.js";

export type ConnectStep = "tcp" | "host-key" | "auth";

/** Observation points for `doctor` timings and for tests (which look at the socket's local port). */
export interface ConnectHooks {
  onSocket?(sock: Socket): void;
  /** `hop` and `index` say which connection of the chain the step belongs to (0 = outermost). */
  onStep?(step: ConnectStep, detail: string, hop: Hop, index: number): void;
}

/** How long a failed handshake waits for its ProxyCommand's exit status and stderr. */
const PROXY_EXIT_WAIT_MS = 1000;

/** How long opening a channel on an established connection may take. */
export const CHANNEL_OPEN_TIMEOUT_MS = 15_000;

// ssh2's default host-key algorithm order; the algorithms we can verify move to the front, as
// OpenSSH does, so a host with several keys offers the one our known_hosts holds.
const HOST_KEY_ALGORITHMS = [
  "ssh-ed25519",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
  "rsa-sha2-512",
  "rsa-sha2-256",
  "ssh-rsa",
] as const;
type HostKeyAlgorithm = (typeof HOST_KEY_ALGORITHMS)[number];

function preferredHostKeyAlgorithms(knownTypes: string[]): HostKeyAlgorithm[] {
  const wanted = (alg: HostKeyAlgorithm) => knownTypes.includes(alg.startsWith("rsa-sha2-") ? "ssh-rsa" : alg);
  return [...HOST_KEY_ALGORITHMS.filter(wanted), ...HOST_KEY_ALGORITHMS.filter((a) => !wanted(a))];
}

export class SshConnection {
  private closedFlag = false;
  private lastError: Error | undefined;

  constructor(
    readonly client: Client,
    /** `user@host:port`, used in every message. */
    readonly target: string,
    /** Jump-host connections and proxy processes carrying this one, innermost first. */
    readonly outer: ReadonlyArray<{ end(): void }> = [],
  ) {
    client.on("error", (err) => {
      this.lastError = err;
    });
    client.on("close", () => {
      this.closedFlag = true;
      // Nothing else uses the hops that carried this connection.
      for (const o of outer) o.end();
    });
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  /** Runs `command` (through the user's login shell, as sshd always does) on a new session channel. */
  exec(command: string, pty?: PseudoTtyOptions, agentForward = false): Promise<ClientChannel> {
    // Agent forwarding is asked for on this one session only (sshd then gives it SSH_AUTH_SOCK).
    return this.openChannel(agentForward ? "a session channel with agent forwarding" : "a session channel", (done) => {
      if (pty) this.client.exec(command, { pty }, done);
      // ssh2 honours `agentForward` per exec; its typings omit it.
      else if (agentForward) this.client.exec(command, { agentForward: true } as ExecOptions, done);
      else this.client.exec(command, done);
    });
  }

  /**
   * Opens a channel to a Unix socket on the server (`direct-streamlocal@openssh.com`; no process
   * on the host). Servers may refuse it (AllowStreamLocalForwarding no, DisableForwarding, a path
   * too long, not OpenSSH): the error's `cause` carries ssh2's `reason` code.
   */
  forwardStreamLocal(socketPath: string): Promise<ClientChannel> {
    return this.openChannel("a stream-local channel", (done) => {
      try {
        this.client.openssh_forwardOutStreamLocal(socketPath, done);
      } catch (err) {
        done(err as Error, undefined as unknown as ClientChannel);
      }
    });
  }

  /**
   * Opens a channel to TCP `host:port` as the server reaches it (`direct-tcpip`). Refused where sshd forwards no TCP (AllowTcpForwarding no).
   */
  forwardTcp(host: string, port: number): Promise<ClientChannel> {
    return this.openChannel(`a TCP channel to ${host}:${port}`, (done) => this.client.forwardOut("127.0.0.1", 0, host, port, done));
  }

  private openChannel(what: string, open: (done: (err: Error | undefined, ch: ClientChannel) => void) => void): Promise<ClientChannel> {
    if (this.closedFlag) {
      const why = this.lastError ? `: ${oneLine(this.lastError.message)}` : "";
      return Promise.reject(new RuntimeError("network", `SSH connection to ${this.target} is closed${why}`));
    }
    return new Promise((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        settled = true;
        reject(new RuntimeError("network", `SSH server ${this.target} did not open ${what} within ${CHANNEL_OPEN_TIMEOUT_MS} ms`));
      }, CHANNEL_OPEN_TIMEOUT_MS);
      const done = (err: Error | undefined, ch: ClientChannel) => {
        clearTimeout(timer);
        if (settled) {
          // Timed out already: do not leak a channel that opened late.
          if (!err) ch.destroy();
          return;
        }
        settled = true;
        if (err) reject(new RuntimeError("network", `SSH server ${this.target} refused ${what}: ${oneLine(err.message)}`, { cause: err }));
        else resolve(ch);
      };
      open(done);
    });
  }

  close(): void {
    this.client.end();
    for (const o of this.outer) o.end();
  }

  /** Drops the connection at once (a silent link would never complete an orderly close). */
  destroy(): void {
    this.client.destroy();
  }
}

function openSocket(host: string, port: number, timeoutMs: number): Promise<Socket> {
  const target = `${host}:${port}`;
  return new Promise((resolve, reject) => {
    const sock = netConnect({ host, port });
    sock.setNoDelay(true);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new RuntimeError("network", `Cannot reach SSH server ${target}: no TCP connection within ${timeoutMs} ms (ETIMEDOUT)`));
    }, timeoutMs);
    sock.once("connect", () => {
      clearTimeout(timer);
      sock.removeAllListeners("error");
      resolve(sock);
    });
    sock.once("error", (err) => {
      clearTimeout(timer);
      sock.destroy();
      reject(networkError(target, err));
    });
  });
}

/** `user@host:port`, with the alias and the hop's role when they tell the user more. */
export function hopName(hop: Hop, role: "target" | "jump"): string {
  const addr = `${hop.user}@${hop.host}:${hop.port}`;
  const alias = hop.label.includes(" (") ? hop.label.slice(0, hop.label.indexOf(" (")) : undefined;
  const named = alias !== undefined ? `${alias} (${addr})` : addr;
  return role === "target" ? named : `jump host ${named}`;
}

/** Hop `index` of `plan`, reached through `outer` (the previous hop's connection) when there is one. */
interface HopRoute {
  plan: ConnectionPlan;
  index: number;
  outer: Client | undefined;
  /** The environment a ProxyCommand runs in (default: this process's). */
  proxyEnv: NodeJS.ProcessEnv | undefined;
}

/** What carries one hop's SSH connection, and the ProxyCommand behind it if any. */
interface HopStream {
  stream: Duplex;
  proxy?: ProxyProcess;
}

/** A stream that is not a TCP socket has to be given one for errors to name: the hop's address. */
async function hopStream({ plan, index, outer, proxyEnv }: HopRoute, hooks: ConnectHooks): Promise<HopStream> {
  const hop = plan.hops[index]!;
  if (outer !== undefined) {
    const prev = plan.hops[index - 1]!;
    const stream = await forwardThrough(outer, hopName(prev, "jump").replace(/^jump host /, ""), hop.host, hop.port, hop.connectTimeoutMs);
    hooks.onStep?.("tcp", `${hop.host}:${hop.port} through ${prev.label}`, hop, index);
    return { stream };
  }
  if (hop.proxyCommand !== undefined) {
    const proxy = startProxyCommand(hop.proxyCommand, proxyEnv);
    hooks.onStep?.("tcp", `ProxyCommand ${hop.proxyCommand}`, hop, index);
    return { stream: proxy.stream, proxy };
  }
  const sock = await openSocket(hop.host, hop.port, hop.connectTimeoutMs);
  hooks.onSocket?.(sock);
  hooks.onStep?.("tcp", `${hop.host}:${hop.port}`, hop, index);
  return { stream: sock };
}

/** One SSH handshake (host key verified before any authentication) over `stream`. */
function handshake(
  { hop, index, name, forwardAgent = false }: { hop: Hop; index: number; name: string; forwardAgent?: boolean },
  { stream, proxy }: HopStream,
  hooks: ConnectHooks,
): Promise<Client> {
  const knownHosts = loadKnownHostsFiles([...hop.userKnownHostsFiles, ...hop.globalKnownHostsFiles]);
  const auth = planAuth(hop);
  const started = Date.now();
  const addr = `${hop.host}:${hop.port}`;
  const client = new ssh2.Client();
  let hostKeyError: RuntimeError | undefined;
  return new Promise<Client>((resolve, reject) => {
    let settled = false;
    const fail = (err: RuntimeError) => {
      if (settled) return;
      settled = true;
      client.end();
      if (!proxy) {
        stream.destroy();
        return reject(err);
      }
      // A proxy command that died is the real story: wait briefly for its exit status and stderr.
      void Promise.race([proxy.exited, sleep(PROXY_EXIT_WAIT_MS)]).then(() => {
        const status = proxy.exitStatus();
        stream.destroy();
        proxy.kill();
        if (status === null || hostKeyError) return reject(err);
        const stderr = proxy.stderr();
        reject(
          new RuntimeError("network", `ProxyCommand for ${name} failed (${status})${stderr ? `: ${stderr}` : ""}: ${hop.proxyCommand}`, {
            cause: err,
          }),
        );
      });
    };
    client.once("ready", () => {
      if (settled) return;
      settled = true;
      hooks.onStep?.("auth", auth.current() ?? "publickey", hop, index);
      resolve(client);
    });
    client.on("error", (err: Error & { level?: string }) => {
      if (hostKeyError) return fail(hostKeyError);
      if (err.level === "client-authentication") {
        const tried = auth.tried.length > 0 ? auth.tried.join(", ") : "nothing";
        const why = auth.unusable.length > 0 ? `; ${auth.unusable.join("; ")}` : "";
        return fail(new RuntimeError("auth", `SSH authentication failed for ${name} (tried: ${tried})${why}`, { cause: err }));
      }
      fail(classifySshError(name === `${hop.user}@${addr}` ? addr : name, err));
    });
    client.on("close", () =>
      fail(
        hostKeyError ??
          new RuntimeError(
            "network",
            `SSH server ${name === `${hop.user}@${addr}` ? addr : name} closed the connection during the handshake`,
          ),
      ),
    );
    client.connect({
      sock: stream,
      username: hop.user,
      readyTimeout: Math.max(1, hop.connectTimeoutMs - (Date.now() - started)),
      keepaliveInterval: hop.keepaliveIntervalMs,
      keepaliveCountMax: hop.keepaliveCountMax,
      algorithms: { serverHostKey: preferredHostKeyAlgorithms(knownKeyTypes(knownHosts, hop.host, hop.port, hop.hostKeyAlias)) },
      // Without hostHash ssh2 hands us the raw key blob; authentication starts only after `true`.
      hostVerifier: (key: Buffer) => {
        const verdict = verifyHostKey(knownHosts, hop.host, hop.port, key, hop.hostKeyAlias);
        if (!verdict.ok && verdict.unknown && hop.acceptNew === "on" && hop.userKnownHostsFiles[0]) {
          recordHostKey(hop.userKnownHostsFiles[0], verdict.name!, key);
          hooks.onStep?.(
            "host-key",
            `${verdict.keyType} ${verdict.fingerprint} (new: recorded in ${hop.userKnownHostsFiles[0]})`,
            hop,
            index,
          );
          return true;
        }
        if (!verdict.ok) {
          const msg = verdict.error!.message;
          const acceptHint =
            verdict.unknown && hop.acceptNew === "configured"
              ? "; ssh_config says StrictHostKeyChecking accept-new: set the runtime option acceptNewHostKeys to true to let the runtime record new keys"
              : "";
          const prefix = name.startsWith("jump host") ? `${name}: ` : "";
          hostKeyError = new RuntimeError("host-key", `${prefix}${msg}${acceptHint}`);
          return false;
        }
        const where = verdict.matched ? ` (known_hosts ${verdict.matched})` : "";
        hooks.onStep?.("host-key", `${verdict.keyType} ${verdict.fingerprint}${where}`, hop, index);
        return true;
      },
      authHandler: auth.handler,
      // What a session that asks for agent forwarding is served from. Not `agentForward`: ssh2
      // would then ask for it on every session, workloads' included.
      ...(forwardAgent && hop.agentSocket ? { agent: hop.agentSocket } : {}),
    });
  });
}

/**
 * Connects through every hop of the plan (resolved from ssh_config when not given): each jump
 * host's connection carries the next one's, and closing the target's connection closes them all.
 * `proxyEnv`: the environment a ProxyCommand runs in (default: this process's).
 */
export async function connectSsh(
  options: RuntimeOptions,
  hooks: ConnectHooks = {},
  plan?: ConnectionPlan,
  proxyEnv?: NodeJS.ProcessEnv,
): Promise<SshConnection> {
  plan ??= await resolvePlan(options);
  const outer: Array<{ end(): void }> = [];
  let via: Client | undefined;
  try {
    for (let i = 0; i < plan.hops.length; i++) {
      const hop = plan.hops[i]!;
      const isTarget = i === plan.hops.length - 1;
      const carrier = await hopStream({ plan, index: i, outer: via, proxyEnv }, hooks);
      const { proxy } = carrier;
      if (proxy) outer.push({ end: () => proxy.kill() });
      const name = hopName(hop, isTarget ? "target" : "jump");
      const client = await handshake({ hop, index: i, name, forwardAgent: isTarget && options.forwardAgent }, carrier, hooks);
      if (isTarget) return new SshConnection(client, hopName(hop, "target"), outer);
      outer.unshift({ end: () => client.end() });
      via = client;
    }
  } catch (err) {
    for (const o of outer) o.end();
    throw err;
  }
  throw new RuntimeError("input", "empty connection plan");
}
