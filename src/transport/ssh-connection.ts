// One authenticated ssh2 connection: our own TCP socket (TCP_NODELAY before the handshake, so
// small frames are not delayed by Nagle), strict known_hosts checking before any authentication,
// public-key auth, bounded timeouts, and classified errors. Everything ssh2-specific lives here so
// a later per-host broker can own connections without touching SshHost's bootstrap logic.
import { connect as netConnect, type Socket } from "node:net";
// ssh2 is CommonJS: Node's ESM loader only offers its default export (dist/cli.js is ESM).
import ssh2 from "ssh2";
import type { Client, ClientChannel, PseudoTtyOptions } from "ssh2";
import { RuntimeError, oneLine } from "../errors.js";
import type { RuntimeOptions } from "../options.js";
import { planAuth } from "./auth.js";
import { classifySshError, networkError } from "./classify.js";
import { knownKeyTypes, loadKnownHosts, verifyHostKey } from "./known-hosts.js";

export type ConnectStep = "tcp" | "host-key" | "auth";

/** Observation points for `doctor` timings and for tests (which look at the socket's local port). */
export interface ConnectHooks {
  onSocket?(sock: Socket): void;
  onStep?(step: ConnectStep, detail: string): void;
}

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
  ) {
    client.on("error", (err) => {
      this.lastError = err;
    });
    client.on("close", () => {
      this.closedFlag = true;
    });
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  /** Runs `command` (through the user's login shell, as sshd always does) on a new session channel. */
  exec(command: string, pty?: PseudoTtyOptions): Promise<ClientChannel> {
    if (this.closedFlag) {
      const why = this.lastError ? `: ${oneLine(this.lastError.message)}` : "";
      return Promise.reject(new RuntimeError("network", `SSH connection to ${this.target} is closed${why}`));
    }
    return new Promise((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        settled = true;
        reject(
          new RuntimeError("network", `SSH server ${this.target} did not open a session channel within ${CHANNEL_OPEN_TIMEOUT_MS} ms`),
        );
      }, CHANNEL_OPEN_TIMEOUT_MS);
      const done = (err: Error | undefined, ch: ClientChannel) => {
        clearTimeout(timer);
        if (settled) {
          // Timed out already: do not leak a channel that opened late.
          if (!err) ch.destroy();
          return;
        }
        settled = true;
        if (err) reject(new RuntimeError("network", `SSH server ${this.target} refused a session channel: ${oneLine(err.message)}`));
        else resolve(ch);
      };
      if (pty) this.client.exec(command, { pty }, done);
      else this.client.exec(command, done);
    });
  }

  close(): void {
    this.client.end();
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

export async function connectSsh(options: RuntimeOptions, hooks: ConnectHooks = {}): Promise<SshConnection> {
  const { host, port, user } = options;
  const target = `${user}@${host}:${port}`;
  const knownHosts = loadKnownHosts(options.knownHostsFile);
  const auth = planAuth(options);
  const started = Date.now();
  const sock = await openSocket(host, port, options.connectTimeoutMs);
  hooks.onSocket?.(sock);
  hooks.onStep?.("tcp", `${host}:${port}`);

  const client = new ssh2.Client();
  let hostKeyError: RuntimeError | undefined;
  return new Promise<SshConnection>((resolve, reject) => {
    let settled = false;
    const fail = (err: RuntimeError) => {
      if (settled) return;
      settled = true;
      client.end();
      sock.destroy();
      reject(err);
    };
    client.once("ready", () => {
      if (settled) return;
      settled = true;
      hooks.onStep?.("auth", auth.current() ?? "publickey");
      resolve(conn);
    });
    client.on("error", (err: Error & { level?: string }) => {
      if (hostKeyError) return fail(hostKeyError);
      if (err.level === "client-authentication") {
        const tried = auth.tried.length > 0 ? auth.tried.join(", ") : "nothing";
        const why = auth.unusable.length > 0 ? `; ${auth.unusable.join("; ")}` : "";
        return fail(new RuntimeError("auth", `SSH authentication failed for ${target} (tried: ${tried})${why}`, { cause: err }));
      }
      fail(classifySshError(`${host}:${port}`, err));
    });
    client.on("close", () =>
      fail(hostKeyError ?? new RuntimeError("network", `SSH server ${host}:${port} closed the connection during the handshake`)),
    );
    // Constructed before connect so its error/close listeners exist for the client's lifetime.
    const conn = new SshConnection(client, target);
    client.connect({
      sock,
      username: user,
      readyTimeout: Math.max(1, options.connectTimeoutMs - (Date.now() - started)),
      keepaliveInterval: options.keepaliveIntervalMs,
      keepaliveCountMax: 3,
      algorithms: { serverHostKey: preferredHostKeyAlgorithms(knownKeyTypes(knownHosts, host, port)) },
      // Without hostHash ssh2 hands us the raw key blob; authentication starts only after `true`.
      hostVerifier: (key: Buffer) => {
        const verdict = verifyHostKey(knownHosts, host, port, key);
        if (!verdict.ok) {
          hostKeyError = verdict.error;
          return false;
        }
        hooks.onStep?.("host-key", `${verdict.keyType} ${verdict.fingerprint}`);
        return true;
      },
      authHandler: auth.handler,
    });
  });
}
