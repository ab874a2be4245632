// RemoteHost over one SSH connection: agent conversations are streams of the host daemon, reached
// through one mux channel (daemon-link.ts); this class starts the agent's modes with the fixed
// bootstrap command (daemon-up, relay, pty-attach), installs the agent (once per content hash)
// when the host does not have it, and opens PTY channels. Connection details (ssh2, host keys,
// auth) stay in ssh-connection.ts.
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { PassThrough, type Duplex } from "node:stream";
import type { ClientChannel } from "ssh2";
import { RuntimeError, fromWireError, oneLine, type WireError } from "../shared/errors.js";
import type { RuntimeOptions } from "./options.js";
import { MarkerScanner } from "../shared/frames.js";
import { AGENT_READY_TIMEOUT_MS, type AgentChannel } from "./agent-channel.js";
import { BootStatusScanner, agentBundle, bootstrapCommand, installCommand, type AgentBundle, type BootReport } from "./bootstrap.js";
import { DaemonLink, type DaemonInfo, type DaemonStarter, type LinkHooks } from "./daemon-link.js";
import { callAgent, type PtyChannel, type PtyRequest, type RemoteHost } from "./host.js";
import { connectSsh, type ConnectHooks, type SshConnection } from "./ssh-connection.js";
import type { AgentAnswer, OneShotOp, OpRequest } from "../shared/agent-api.js";
import { withTimeout } from "../shared/async.js";
import { LineReadError, readFirstLine } from "../shared/json-lines.js";
import type { ConnectionPlan } from "./ssh-config/resolve.js";

/** Bound for uploading and linking the agent (a few hundred KB). */
export const INSTALL_TIMEOUT_MS = 60_000;
const DEFAULT_TERM = "xterm-256color";
const DEFAULT_DAEMON_IDLE_MS = 300_000;
/** daemon-up and agent-hold answer with one short JSON line; a longer one is not the agent. */
const MAX_ANSWER_LINE = 64 * 1024;

type Started = { rest: Buffer } | { report?: BootReport; error: unknown };

export class SshHost implements RemoteHost, DaemonStarter {
  /** Agent uploads this host object performed (observable by doctor and tests). */
  installs = 0;
  readonly root: string;
  readonly reattachable = false;
  readonly bundle: AgentBundle;
  /** The mux channel to the host daemon carrying every agent conversation of this connection. */
  readonly link: DaemonLink;

  constructor(
    private readonly conn: SshConnection,
    private readonly options: RuntimeOptions,
    bundle: AgentBundle = agentBundle(),
    hooks: LinkHooks = {},
  ) {
    this.root = options.root;
    this.bundle = bundle;
    this.link = new DaemonLink(this, options.keepaliveIntervalMs, hooks);
  }

  get target(): string {
    return this.conn.target;
  }

  get build(): string {
    return this.bundle.hash;
  }

  get connectionClosed(): boolean {
    return this.conn.closed;
  }

  private command(args: string[] = []): string {
    return bootstrapCommand(this.root, this.options.remoteNode, this.bundle.hash, args);
  }

  private daemonArgs(mode: "daemon-up" | "relay"): string[] {
    return [mode, `--idle-ms=${this.options.daemonIdleMs ?? DEFAULT_DAEMON_IDLE_MS}`];
  }

  /**
   * Runs `node agent.cjs <args>` on a session channel (installing the agent first when the host
   * lacks it); resolves once its ready marker arrived, with the channel paused and the bytes after
   * the marker.
   */
  private async startAgent(args: string[], agentForward = false): Promise<{ ch: ClientChannel; rest: Buffer }> {
    for (let attempt = 0; ; attempt++) {
      const ch = await this.conn.exec(this.command(args), undefined, agentForward);
      ch.stderr.resume();
      const started = await this.awaitMarker(ch, "remote agent");
      if ("rest" in started) return { ch, rest: started.rest };
      if (started.report?.status === "need-install" && attempt === 0) {
        await this.install();
        continue;
      }
      throw this.bootError(started.report, started.error);
    }
  }

  /** daemon-up: the daemon of this build runs (started if it did not); where it listens. */
  /** The first line the agent on `ch` writes after its marker (bounded), e.g. daemon-up's answer. */
  private async answerLine(ch: ClientChannel, rest: Buffer, mode: string, ended: string): Promise<string> {
    try {
      const line = await readFirstLine(ch, { head: rest, maxLine: MAX_ANSWER_LINE, timeoutMs: AGENT_READY_TIMEOUT_MS });
      return line.toString("utf8");
    } catch (err) {
      if (!(err instanceof LineReadError)) throw err;
      if (err.reason === "timeout")
        throw new RuntimeError("network", `${mode} on ${this.target} did not answer within ${AGENT_READY_TIMEOUT_MS} ms`);
      if (err.reason === "too-long") throw new RuntimeError("remote", `${mode} on ${this.target} gave a malformed answer`);
      throw new RuntimeError("remote", `${ended}: ${mode} ended without an answer`);
    }
  }

  async daemonUp(): Promise<DaemonInfo> {
    const { ch, rest } = await this.startAgent(this.daemonArgs("daemon-up"));
    try {
      const answer = JSON.parse(
        await this.answerLine(ch, rest, "daemon-up", `the host daemon on ${this.target} could not be started`),
      ) as Partial<DaemonInfo> & { error?: WireError };
      if (answer.error) throw fromWireError(answer.error);
      if (typeof answer.socket !== "string" || typeof answer.pid !== "number")
        throw new RuntimeError("remote", `daemon-up on ${this.target} gave a malformed answer`);
      return { socket: answer.socket, pid: answer.pid };
    } catch (err) {
      if (err instanceof SyntaxError) throw new RuntimeError("remote", `daemon-up on ${this.target} gave a malformed answer`);
      throw err;
    } finally {
      ch.destroy();
    }
  }

  /**
   * Opens the session sshd forwards the Paseo side's ssh-agent to (`agent-hold`, kept open while
   * the connection lasts). `forwarded` false: sshd gave it no agent socket. Rejects when sshd
   * refused forwarding (AllowAgentForwarding no).
   */
  async holdAgent(): Promise<{ ch: ClientChannel; forwarded: boolean }> {
    const { ch, rest } = await this.startAgent(["agent-hold"], true);
    try {
      const answer = JSON.parse(await this.answerLine(ch, rest, "agent-hold", `agent forwarding on ${this.target} failed`)) as {
        forwarded?: unknown;
      };
      return { ch, forwarded: answer.forwarded === true };
    } catch (err) {
      ch.destroy();
      if (err instanceof SyntaxError) throw new RuntimeError("remote", `agent-hold on ${this.target} gave a malformed answer`);
      throw err;
    }
  }

  forward(socket: string): Promise<Duplex> {
    return this.conn.forwardStreamLocal(socket);
  }

  /**
   * Whether sshd forwards TCP (what forwarded ports need): a channel to a port nothing listens on
   * is refused with "connect failed" where it does, "administratively prohibited" where
   * AllowTcpForwarding (or DisableForwarding) forbids it. The refusal's one line, or null.
   */
  async tcpForwardingRefused(): Promise<string | null> {
    try {
      (await this.conn.forwardTcp("127.0.0.1", 1)).destroy();
      return null;
    } catch (err) {
      const reason = ((err as Error).cause as { reason?: unknown } | undefined)?.reason;
      // SSH_OPEN_ADMINISTRATIVELY_PROHIBITED (1); anything else means the server tried to connect.
      return reason === 1 ? oneLine((err as Error).message) : null;
    }
  }

  async relay(): Promise<Duplex> {
    const { ch, rest } = await this.startAgent(this.daemonArgs("relay"));
    if (rest.length > 0) ch.unshift(rest);
    return ch;
  }

  /** One agent conversation: a new stream of the host daemon. */
  openAgent(opts: { session?: string } = {}): Promise<AgentChannel> {
    return this.link.agent(opts.session !== undefined);
  }

  call<Op extends OneShotOp>(op: Op, fields: OpRequest<Op>, timeoutMs?: number): Promise<AgentAnswer<Op>> {
    return callAgent(this, op, fields, timeoutMs);
  }

  async openPty(args: string[], pty: PtyRequest): Promise<PtyChannel> {
    for (let attempt = 0; ; attempt++) {
      const ch = await this.conn.exec(this.command(args), {
        rows: pty.rows,
        cols: pty.cols,
        width: 0,
        height: 0,
        term: pty.term ?? DEFAULT_TERM,
      });
      ch.stderr.resume();
      const closed = new Promise<void>((resolve) => ch.once("close", () => resolve()));
      const started = await this.awaitMarker(ch, "remote agent PTY");
      if ("rest" in started) {
        const output = new PassThrough();
        if (started.rest.length > 0) output.write(started.rest);
        ch.pipe(output);
        return {
          stdin: ch,
          output,
          setWindow: (rows, cols) => ch.setWindow(rows, cols, 0, 0),
          // ssh2 reports a channel closed only once its output was read to the end: output
          // nobody will read any more is discarded, or the channel would count as open forever.
          destroy: () => {
            ch.destroy();
            output.resume();
          },
          closed,
        };
      }
      if (started.report?.status === "need-install" && attempt === 0) {
        await this.install();
        continue;
      }
      throw this.bootError(started.report, started.error);
    }
  }

  /**
   * Strips everything up to the ready marker (login-shell noise; on a tty, \n may have become
   * \r\n before it) and pauses the channel there.
   */
  private awaitMarker(ch: ClientChannel, what: string): Promise<Started> {
    return new Promise((resolve) => {
      const marker = new MarkerScanner();
      const boot = new BootStatusScanner();
      const timer = setTimeout(() => {
        cleanup();
        ch.destroy();
        resolve({ error: new RuntimeError("network", `${what} on ${this.target} did not start within ${AGENT_READY_TIMEOUT_MS} ms`) });
      }, AGENT_READY_TIMEOUT_MS);
      const onData = (d: Buffer) => {
        boot.push(d);
        const rest = marker.push(d);
        if (rest === null) return;
        cleanup();
        ch.pause();
        resolve({ rest });
      };
      let stderr = "";
      const onStderr = (d: Buffer) => (stderr = (stderr + d.toString("utf8")).slice(-2000));
      const onClose = () => {
        cleanup();
        const detail = oneLine(marker.noise || stderr).slice(-300);
        resolve({
          report: boot.report,
          error: new RuntimeError("remote-dependency", `${what} did not start${detail ? `: ${detail}` : ""}`),
        });
      };
      const cleanup = () => {
        clearTimeout(timer);
        ch.off("data", onData);
        ch.off("close", onClose);
        ch.stderr.off("data", onStderr);
      };
      ch.on("data", onData);
      ch.on("close", onClose);
      ch.stderr.on("data", onStderr);
    });
  }

  private bootError(report: BootReport | undefined, cause: unknown): RuntimeError {
    const t = this.target;
    const nodeHint = this.options.remoteNode
      ? `the "remoteNode" option points at ${this.options.remoteNode}`
      : `or set the "remoteNode" option to its absolute path`;
    switch (report?.status) {
      case "no-node":
        return new RuntimeError(
          "remote-dependency",
          `node was not found on ${t} (searched the login shell's PATH, /usr/local/bin, /usr/bin, /opt/homebrew/bin, ~/.nvm): install Node.js >= 18 ${nodeHint}`,
        );
      case "bad-node":
        return new RuntimeError(
          "remote-dependency",
          `the "remoteNode" option points at ${report.detail}, which is not an executable file on ${t}`,
        );
      case "old-node": {
        const [version, path] = [report.detail.split(":")[0], report.detail.split(":").slice(1).join(":")];
        const what = version ? `is version ${version}` : "did not report its version";
        return new RuntimeError("remote-dependency", `node at ${path} on ${t} ${what}; Node.js >= 18 is required: install it, ${nodeHint}`);
      }
      case "no-git":
        return new RuntimeError(
          "remote-dependency",
          `git was not found on ${t} (login shell's PATH; node found at ${report.detail}): install git`,
        );
      case "unsafe-root": {
        const [mode, owner, ...path] = report.detail.split(":");
        return new RuntimeError(
          "ownership",
          `remote root directory ${path.join(":")} on ${t} is owned by ${owner || "?"} with mode ${mode || "?"}; the root, its agent/ and agent/${this.bundle.hash}/ must belong to ${this.options.user} and not be writable by group or others: fix that or choose another root`,
        );
      }
      case "unsafe-parent": {
        const [mode, owner, ...path] = report.detail.split(":");
        return new RuntimeError(
          "ownership",
          `directory ${path.join(":")} above the remote root on ${t} is owned by ${owner || "?"} with mode ${mode || "?"}; every directory above the root (up to ${this.options.user}'s home) must belong to root or ${this.options.user} and not be writable by group or others, as OpenSSH's StrictModes requires, or whoever can write it could replace the root: fix that or choose another root`,
        );
      }
      case "need-install":
        return new RuntimeError(
          "remote",
          `remote agent is still missing on ${t} after installing it into ${this.root}/agent/${this.bundle.hash}`,
        );
      default:
        return cause instanceof RuntimeError
          ? cause
          : new RuntimeError("remote", `remote agent on ${t} did not start: ${oneLine(String(cause))}`);
    }
  }

  private installing: Promise<void> | undefined;

  /** One upload at a time per host object: concurrent first calls share it. */
  private install(): Promise<void> {
    this.installing ??= this.upload().finally(() => (this.installing = undefined));
    return this.installing;
  }

  /** Uploads dist/remote-agent.cjs into `<root>/agent/<hash>/agent.cjs` over its own channel. */
  private async upload(): Promise<void> {
    const data = readFileSync(this.bundle.path);
    const hash = createHash("sha256").update(data).digest("hex").slice(0, 16);
    if (hash !== this.bundle.hash)
      throw new RuntimeError("remote", `remote agent bundle ${this.bundle.path} changed while running; rerun the operation`);
    const ch = await this.conn.exec(installCommand(this.root, hash, data.length));
    const boot = new BootStatusScanner();
    let stderr = "";
    ch.on("data", (d: Buffer) => boot.push(d));
    ch.stderr.on("data", (d: Buffer) => (stderr = (stderr + d.toString("utf8")).slice(-2000)));
    const exited = new Promise<number | null>((resolve) => {
      let code: number | null = null;
      ch.once("exit", (c: number | null) => (code = c));
      ch.once("close", () => resolve(code));
    });
    ch.end(data);
    const code = await withTimeout(exited, INSTALL_TIMEOUT_MS, () => {
      ch.destroy();
      return new RuntimeError("network", `uploading the remote agent to ${this.target} did not finish within ${INSTALL_TIMEOUT_MS} ms`);
    });
    if (boot.report?.status === "unsafe-root" || boot.report?.status === "unsafe-parent") throw this.bootError(boot.report, null);
    if (boot.report?.status !== "installed") {
      const why = boot.report ? `${boot.report.status} ${boot.report.detail}`.trim() : `exit ${String(code)}`;
      const err = oneLine(stderr).slice(-300);
      throw new RuntimeError(
        "remote",
        `installing the remote agent into ${this.root}/agent/${hash} on ${this.target} failed (${why})${err ? `: ${err}` : ""}`,
      );
    }
    this.installs++;
  }

  close(): void {
    this.link.close();
    this.conn.close();
  }
}

/** Connects (host key verified before auth) and returns a RemoteHost for the given options. */
export async function connectSshHost(options: RuntimeOptions, hooks?: ConnectHooks, plan?: ConnectionPlan): Promise<SshHost> {
  const bundle = agentBundle();
  const conn = await connectSsh(options, hooks, plan);
  return new SshHost(conn, options, bundle);
}
