// RemoteHost over one SSH connection: starts the remote agent with the fixed bootstrap command,
// installs it (once per content hash) when the host does not have it, and opens PTY channels.
// Connection details (ssh2, host keys, auth) stay in ssh-connection.ts; the per-host broker runs
// one SshHost per connection it holds (src/broker/pool.ts).
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { PassThrough } from "node:stream";
import type { ClientChannel } from "ssh2";
import { RuntimeError, oneLine } from "../shared/errors.js";
import type { RuntimeOptions } from "./options.js";
import { MarkerScanner } from "../shared/frames.js";
import { AGENT_READY_TIMEOUT_MS, AgentChannel } from "./agent-channel.js";
import { BootStatusScanner, agentBundle, bootstrapCommand, installCommand, type AgentBundle, type BootReport } from "./bootstrap.js";
import { callAgent, type PtyChannel, type PtyRequest, type RemoteHost } from "./host.js";
import { connectSsh, type ConnectHooks, type SshConnection } from "./ssh-connection.js";
import type { ConnectionPlan } from "./ssh-config/resolve.js";
import type { AgentAnswer, OneShotOp, OpRequest } from "../shared/agent-api.js";
import { withTimeout } from "../shared/async.js";

/** Bound for uploading and linking the agent (a few hundred KB). */
export const INSTALL_TIMEOUT_MS = 60_000;
const DEFAULT_TERM = "xterm-256color";

export class SshHost implements RemoteHost {
  /** Agent uploads this host object performed (observable by doctor and tests). */
  installs = 0;
  readonly root: string;
  readonly bundle: AgentBundle;

  constructor(
    private readonly conn: SshConnection,
    private readonly options: RuntimeOptions,
    bundle: AgentBundle = agentBundle(),
  ) {
    this.root = options.root;
    this.bundle = bundle;
  }

  get target(): string {
    return this.conn.target;
  }

  private command(args: string[] = []): string {
    return bootstrapCommand(this.root, this.options.remoteNode, this.bundle.hash, args);
  }

  async openAgent(): Promise<AgentChannel> {
    for (let attempt = 0; ; attempt++) {
      const ch = await this.conn.exec(this.command());
      const boot = new BootStatusScanner();
      const onData = (d: Buffer) => boot.push(d);
      ch.on("data", onData);
      const agent = new AgentChannel({ stdin: ch, stdout: ch, stderr: ch.stderr, destroy: () => ch.destroy() });
      try {
        await withTimeout(agent.ready, AGENT_READY_TIMEOUT_MS, () => {
          agent.destroy();
          return new RuntimeError("network", `remote agent on ${this.target} did not start within ${AGENT_READY_TIMEOUT_MS} ms`);
        });
        ch.off("data", onData);
        return agent;
      } catch (err) {
        if (boot.report?.status === "need-install" && attempt === 0) {
          await this.install();
          continue;
        }
        throw this.bootError(boot.report, err);
      }
    }
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
      const started = await this.awaitPtyMarker(ch);
      if ("channel" in started) return started.channel;
      if (started.report?.status === "need-install" && attempt === 0) {
        await this.install();
        continue;
      }
      throw this.bootError(started.report, started.error);
    }
  }

  /** Strips everything up to the ready marker (the tty may have turned \n into \r\n before it). */
  private awaitPtyMarker(ch: ClientChannel): Promise<{ channel: PtyChannel } | { report?: BootReport; error: unknown }> {
    const closed = new Promise<void>((resolve) => ch.once("close", () => resolve()));
    ch.stderr.resume();
    return new Promise((resolve) => {
      const marker = new MarkerScanner();
      const boot = new BootStatusScanner();
      const timer = setTimeout(() => {
        cleanup();
        ch.destroy();
        resolve({
          error: new RuntimeError("network", `remote agent PTY on ${this.target} did not start within ${AGENT_READY_TIMEOUT_MS} ms`),
        });
      }, AGENT_READY_TIMEOUT_MS);
      const onData = (d: Buffer) => {
        boot.push(d);
        const rest = marker.push(d);
        if (rest === null) return;
        cleanup();
        const output = new PassThrough();
        if (rest.length > 0) output.write(rest);
        ch.pipe(output);
        resolve({
          channel: {
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
          },
        });
      };
      const onClose = () => {
        cleanup();
        const detail = oneLine(marker.noise).slice(-300);
        resolve({
          report: boot.report,
          error: new RuntimeError("remote-dependency", `remote agent PTY did not start${detail ? `: ${detail}` : ""}`),
        });
      };
      const cleanup = () => {
        clearTimeout(timer);
        ch.off("data", onData);
        ch.off("close", onClose);
      };
      ch.on("data", onData);
      ch.on("close", onClose);
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
    if (boot.report?.status === "unsafe-root") throw this.bootError(boot.report, null);
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
    this.conn.close();
  }
}

/** Connects (host key verified before auth) and returns a RemoteHost for the given options. */
export async function connectSshHost(options: RuntimeOptions, hooks?: ConnectHooks, plan?: ConnectionPlan): Promise<SshHost> {
  const bundle = agentBundle();
  const conn = await connectSsh(options, hooks, plan);
  return new SshHost(conn, options, bundle);
}
