// The runtime's side of one agent conversation: frames over a byte duplex (a stream to the host
// daemon, a broker socket, or a local child process in tests). Strips login-shell noise before the
// ready marker (where there can be any), decodes frames and offers request/response and streaming use.
import { EventEmitter } from "node:events";
import type { Readable, Writable } from "node:stream";
import { AGENT_READY_MARKER, BinaryFrameDecoder, FrameKind, MarkerScanner, encodeJson, type Frame } from "../shared/frames.js";
import { RuntimeError, fromWireError, oneLine, toWireError } from "../shared/errors.js";
import {
  decodeAgentMessage,
  isAnswer,
  type AgentAnswer,
  type AgentMessage,
  type AgentRequest,
  type OneShotOp,
  type RuntimeMessage,
} from "../shared/agent-api.js";

export interface ByteDuplex {
  stdin: Writable;
  stdout: Readable;
  /** Stderr of the remote command (login-shell and agent diagnostics). */
  stderr?: Readable;
  /** Ends the underlying channel/process forcibly. */
  destroy(): void;
}

export interface AgentChannelEvents {
  frame: [Frame];
  close: [];
}

/** How long to wait for the agent's ready marker before calling the host broken. */
export const AGENT_READY_TIMEOUT_MS = 20_000;

export class AgentChannel extends EventEmitter<AgentChannelEvents> {
  private readonly scanner = new MarkerScanner();
  private readonly decoder = new BinaryFrameDecoder();
  private stderrText = "";
  private closedFlag = false;
  private readyResolve!: () => void;
  private readyReject!: (e: Error) => void;
  /** Resolves when the agent's ready marker has been seen. */
  readonly ready: Promise<void>;

  /**
   * An `error` the agent (or a broker, for a lost link) sent before anyone listened: it arrives in
   * the same chunk as the ready marker when the conversation was lost at once, and is the answer
   * to the request that comes next.
   */
  private unheardError: Extract<AgentMessage, { type: "error" }> | null = null;
  /** Who the agent runs for, in messages (`host:port`). */
  private readonly peer: string;

  /** `marker: false`: frames start at once (a mux stream carries no shell output). */
  constructor(
    private readonly io: ByteDuplex,
    opts: { marker?: boolean; peer?: string } = {},
  ) {
    super();
    this.peer = opts.peer ? ` on ${opts.peer}` : "";
    this.ready = new Promise((res, rej) => {
      this.readyResolve = res;
      this.readyReject = rej;
    });
    this.ready.catch(() => undefined);
    if (opts.marker === false) {
      this.scanner.push(AGENT_READY_MARKER);
      this.readyResolve();
    }
    io.stdout.on("data", (chunk: Buffer) => this.onData(chunk));
    io.stderr?.on("data", (chunk: Buffer) => {
      this.stderrText = (this.stderrText + chunk.toString("utf8")).slice(-4000);
    });
    const onEnd = () => this.onClosed();
    io.stdout.on("end", onEnd);
    io.stdout.on("close", onEnd);
    io.stdout.on("error", onEnd);
    io.stdin.on("error", () => undefined);
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  /** Remote stderr seen so far (diagnostics only). */
  get stderr(): string {
    return this.stderrText;
  }

  private onData(chunk: Buffer): void {
    const rest = this.scanner.push(chunk);
    if (rest === null) return;
    this.readyResolve();
    if (rest.length === 0) return;
    let frames: Frame[];
    try {
      frames = this.decoder.push(rest);
    } catch (err) {
      this.emit("frame", {
        kind: FrameKind.Json,
        payload: Buffer.from(JSON.stringify({ type: "error", errorClass: "remote", message: `agent protocol error: ${String(err)}` })),
      });
      this.destroy();
      return;
    }
    for (const f of frames) {
      if (this.listenerCount("frame") === 0 && f.kind === FrameKind.Json) {
        const msg = decodeAgentMessage(f.payload);
        if (msg?.type === "error") this.unheardError ??= msg;
      }
      this.emit("frame", f);
    }
  }

  /**
   * The conversation was lost for a known reason: whoever waits for an answer gets `err` (as if
   * the agent had sent it), then the channel closes.
   */
  lose(err: RuntimeError): void {
    if (this.closedFlag) return;
    this.emit("frame", { kind: FrameKind.Json, payload: Buffer.from(JSON.stringify({ type: "error", ...toWireError(err) }), "utf8") });
    this.destroy();
  }

  private onClosed(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    if (!this.scanner.found) {
      const detail = oneLine(this.stderrText || this.scanner.noise).slice(0, 500);
      this.readyReject(new RuntimeError("remote-dependency", `remote agent did not start${detail ? `: ${detail}` : ""}`));
    }
    this.emit("close");
  }

  send(buf: Buffer | Buffer[]): void {
    if (this.closedFlag) return;
    for (const b of Array.isArray(buf) ? buf : [buf]) this.io.stdin.write(b);
  }

  /** Resolves once the sending side can take more data (flow control for large streams). */
  drained(): Promise<void> {
    const out = this.io.stdin;
    if (this.closedFlag || !out.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        out.off("drain", done);
        this.off("close", done);
        resolve();
      };
      out.once("drain", done);
      this.once("close", done);
    });
  }

  /** Sends the conversation's request (first frame) or a later control message. */
  sendJson(value: AgentRequest | RuntimeMessage): void {
    this.send(encodeJson(value));
  }

  /** Stops reading the agent's bytes (a consumer of data frames is behind); the agent is held back by flow control. */
  pauseInput(): void {
    this.io.stdout.pause();
  }

  resumeInput(): void {
    this.io.stdout.resume();
  }

  /** Closes our sending side (the agent sees EOF). */
  end(): void {
    this.io.stdin.end();
  }

  destroy(): void {
    this.io.destroy();
    this.onClosed();
  }

  /**
   * Sends one request and waits for its single `result`/`error` frame, checking the result against
   * what the op answers. `timeoutMs` bounds the whole exchange; the error names the op so a user
   * knows what hung.
   */
  async request<Op extends OneShotOp>(req: AgentRequest<Op>, timeoutMs = 120_000): Promise<AgentAnswer<Op>> {
    return new Promise<AgentAnswer<Op>>((resolve, reject) => {
      const closedError = () => new RuntimeError("network", `connection to the remote agent${this.peer} closed during ${req.op}`);
      const early = this.unheardError;
      if (early) {
        this.unheardError = null;
        return reject(fromWireError(early));
      }
      // Closed before the request: no close event is coming any more, so say so now.
      if (this.closedFlag) return reject(closedError());
      const timer = setTimeout(() => {
        cleanup();
        this.destroy();
        reject(new RuntimeError("network", `remote agent${this.peer} did not answer ${req.op} within ${timeoutMs} ms`));
      }, timeoutMs);
      const onFrame = (f: Frame) => {
        if (f.kind !== FrameKind.Json) return;
        const msg = decodeAgentMessage(f.payload);
        if (msg?.type === "result") {
          cleanup();
          if (isAnswer(req.op, msg.value)) resolve(msg.value);
          else reject(new RuntimeError("remote", `remote agent answered ${req.op} with a malformed value`));
        } else if (msg?.type === "error") {
          cleanup();
          reject(fromWireError(msg));
        } else if (!msg) {
          cleanup();
          this.destroy();
          reject(new RuntimeError("remote", `remote agent sent a malformed message during ${req.op}`));
        }
      };
      const onClose = () => {
        cleanup();
        reject(closedError());
      };
      const cleanup = () => {
        clearTimeout(timer);
        this.off("frame", onFrame);
        this.off("close", onClose);
      };
      this.on("frame", onFrame);
      this.on("close", onClose);
      this.sendJson(req);
    });
  }
}

/** A decoded JSON frame, or null for data frames and for JSON that is not an agent message. */
export function agentMessage(f: Frame): AgentMessage | null {
  return f.kind === FrameKind.Json ? decodeAgentMessage(f.payload) : null;
}
