// RemoteHost through the per-host broker (src/broker): each agent or PTY channel is one Unix-socket
// connection to the broker, which owns the SSH connection shared by every runtime process. CLI
// operations see the same interface as SshHost, so nothing above the transport changes.
import type { Socket } from "node:net";
import { PassThrough, Writable } from "node:stream";
import { RuntimeError, fromWireError } from "../../shared/errors.js";
import { FrameKind, encodeData, encodeFrame, encodeJson } from "../../shared/frames.js";
import type { RuntimeOptions } from "../../transport/options.js";
import { connectBroker, type BrokerTarget } from "./connect-broker.js";
import {
  ACQUIRE_WAIT_MS,
  BrokerLineError,
  BrokerResultSchema,
  lineOf,
  reconnectWindowMs,
  readLine,
  writeLine,
  type BrokerRequest,
  type BrokerResult,
  type WindowMessage,
} from "../common/wire.js";
import { AGENT_READY_TIMEOUT_MS, AgentChannel } from "../../transport/agent-channel.js";
import { callAgent, type AgentOpenOptions, type PtyChannel, type PtyRequest, type RemoteHost } from "../../transport/host.js";
import type { AgentAnswer, OneShotOp, OpRequest } from "../../shared/agent-api.js";

/**
 * The header of an agent conversation (`token`, `reattach`, `gen`: a resumable exec's, see
 * RemoteHost.openAgent). A re-attachment never fails fast: it waits out the link's outage.
 */
function agentRequest(opts: AgentOpenOptions = {}, failFast = false): BrokerRequest {
  return {
    kind: "agent",
    ...(opts.session !== undefined ? { token: opts.session } : {}),
    ...(opts.reattach === true ? { reattach: true, gen: opts.gen ?? 0 } : failFast ? { failFast: true } : {}),
  };
}

/** What an operation's host connection is opened with (openHost). */
export interface HostOpening {
  /** The first agent conversation's resume token (a resumable exec's), written with the connect. */
  session?: string;
  /** A pool's workspace: with the link down, fail after connectTimeoutMs instead of the reconnect window. */
  failFast?: boolean;
  /** Only a broker that runs now: never start one (a hand-off run of the broker itself). */
  noStart?: boolean;
}

export class BrokerHost implements RemoteHost {
  readonly root: string;
  readonly reattachable = true;
  private readonly open = new Set<Socket>();
  /**
   * Dialled by `connect()` so connection problems surface where SshHost's would, with an agent
   * request already written: every operation's first channel is an agent conversation, and sent
   * with the connect it costs no round trip to the broker of its own.
   */
  private preDialled: Socket | undefined;

  /** The header written with the connect (the first agent conversation's). */
  private readonly firstLine: string;

  constructor(
    private readonly options: RuntimeOptions,
    private readonly target: BrokerTarget,
    /** What the operation's first agent conversation will be (a resumable exec's has its token). */
    private readonly first: HostOpening = {},
  ) {
    this.root = options.root;
    this.firstLine = lineOf(agentRequest(first, first.failFast));
  }

  /** Makes sure a broker is reachable (starting one if needed). */
  async connect(): Promise<this> {
    this.preDialled = await this.dial(this.firstLine);
    return this;
  }

  private async dial(early?: string): Promise<Socket> {
    const sock = await connectBroker(this.options, this.target, early, this.first.noStart !== true);
    this.open.add(sock);
    sock.once("close", () => this.open.delete(sock));
    return sock;
  }

  /**
   * Names the channel and waits for the broker's verdict. The broker may first have to reconnect
   * or wait for a free session, so the bound covers that plus agent start; a re-attachment waits
   * until `waitUntil` instead (the broker holds it for as long as the link is down, and closing
   * on it would read as the wrapper's death).
   */
  private async request(req: BrokerRequest, waitUntil?: number): Promise<Socket> {
    const connect = this.options.connectTimeoutMs;
    const bound = Math.max(ACQUIRE_WAIT_MS, reconnectWindowMs(connect)) + connect + AGENT_READY_TIMEOUT_MS;
    const timeoutMs = waitUntil === undefined ? bound : Math.max(bound, waitUntil - Date.now());
    for (let attempt = 0; ; attempt++) {
      let sock = this.preDialled;
      this.preDialled = undefined;
      if (sock && lineOf(req) !== this.firstLine) {
        // Not the channel asked for in advance: the broker ends that one as the client goes.
        sock.destroy();
        sock = undefined;
      }
      if (!sock) {
        sock = await this.dial();
        writeLine(sock, req);
      }
      let result: BrokerResult;
      try {
        result = await readLine(sock, BrokerResultSchema, timeoutMs, "answer");
      } catch (err) {
        sock.destroy();
        // A broker that died between hello and answer is replaced once; the channel never opened.
        if (attempt === 0 && err instanceof BrokerLineError && err.reason === "closed") continue;
        throw err;
      }
      if (!result.ok) {
        sock.destroy();
        throw fromWireError(result);
      }
      return sock;
    }
  }

  async openAgent(opts: AgentOpenOptions = {}): Promise<AgentChannel> {
    const sock = await this.request(agentRequest(opts, this.first.failFast), opts.waitUntil);
    const ch = new AgentChannel(
      { stdin: sock, stdout: sock, destroy: () => sock.destroy() },
      { peer: `${this.options.host}:${this.options.port}` },
    );
    sock.resume();
    await ch.ready;
    return ch;
  }

  async openPty(args: string[], pty: PtyRequest): Promise<PtyChannel> {
    const sock = await this.request({ kind: "pty", args, pty });
    const output = new PassThrough();
    sock.pipe(output);
    sock.resume();
    // Completes a write only once the socket took it, so the writer sees the broker's (and
    // behind it the SSH channel's) backpressure instead of growing this socket's buffer.
    const stdin = new Writable({
      write(chunk: Buffer, _enc, cb) {
        let flushed = true;
        for (const f of encodeData(FrameKind.Stdin, chunk)) flushed = sock.write(f);
        if (flushed || sock.destroyed) return cb();
        const done = () => {
          sock.off("drain", done).off("close", done);
          cb();
        };
        sock.on("drain", done).on("close", done);
      },
      final(cb) {
        sock.write(encodeFrame(FrameKind.Eof, Buffer.from([0])), () => cb());
      },
    });
    stdin.on("error", () => undefined);
    return {
      stdin,
      output,
      setWindow: (rows, cols) => {
        const msg: WindowMessage = { type: "window", rows, cols };
        sock.write(encodeJson(msg));
      },
      destroy: () => sock.destroy(),
      // The socket is half-open capable: the broker ending it (the channel closed, its output all
      // sent) is the end, although our sending side stays open until we close it.
      closed: new Promise<void>((resolve) => {
        sock.once("end", () => resolve());
        sock.once("close", () => resolve());
      }),
    };
  }

  /**
   * What the broker holds of the host's notices of `kind` (of `key` only, when given), read once
   * the daemon's snapshot arrived (the broker reaches for the host first, bounded).
   */
  async notices(kind: string, key?: string): Promise<Array<Record<string, unknown>>> {
    const sock = await this.dial();
    try {
      writeLine(sock, { kind: "notices", of: kind, ...(key !== undefined ? { key } : {}) });
      const result = await readLine(sock, BrokerResultSchema, this.options.connectTimeoutMs + AGENT_READY_TIMEOUT_MS, "answer");
      if (!result.ok) throw fromWireError(result);
      return result.notices ?? [];
    } finally {
      sock.destroy();
    }
  }

  call<Op extends OneShotOp>(op: Op, fields: OpRequest<Op>, timeoutMs?: number): Promise<AgentAnswer<Op>> {
    return callAgent(this, op, fields, timeoutMs);
  }

  /** Ends this process's channels; the broker and its SSH connection stay for the next process. */
  close(): void {
    for (const s of this.open) s.destroy();
  }
}
