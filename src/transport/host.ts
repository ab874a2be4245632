// What the runtime's operations need from a remote host, independent of how it is reached:
// agent conversations (framed channels) and PTY channels. Implemented over one ssh2 connection
// (ssh-host.ts) and through the shared per-host broker (src/broker/client/broker-host.ts).
import type { AgentChannel } from "./agent-channel.js";
import type { Readable, Writable } from "node:stream";
import type { AgentAnswer, AgentOp, AgentRequest, ExecAttachRequest, ExecRunRequest, OneShotOp, OpRequest } from "../shared/agent-api.js";

export interface PtyRequest {
  rows: number;
  cols: number;
  term?: string;
}

/** A raw PTY channel: bytes written go to the terminal, bytes read are terminal output. */
export interface PtyChannel {
  stdin: Writable;
  /** Terminal output with everything before the agent's ready marker already removed. */
  output: Readable;
  /** Applies a new window size on the server side (SSH window-change). */
  setWindow(rows: number, cols: number): void;
  /** Ends the channel. */
  destroy(): void;
  /** Resolves when the channel has closed. */
  closed: Promise<void>;
}

/** What an agent conversation is for (see RemoteHost.openAgent). */
export interface AgentOpenOptions {
  session?: string;
  reattach?: boolean;
  /** A re-attachment's attach generation (src/shared/stream-replay.ts); exec.run's conversation is 0. */
  gen?: number;
  /** A re-attachment waits for the broker's answer until then (epoch ms): the end of the grace. */
  waitUntil?: number;
}

export interface RemoteHost {
  /** Root directory as configured (may start with "~/"); sent in every agent request. */
  readonly root: string;
  /**
   * Whether a conversation lost with the link can be re-attached through this host later: true
   * through the broker, which reconnects by itself; false in-process (`broker: false`), whose one
   * SSH connection is gone for good when the link drops.
   */
  readonly reattachable: boolean;
  /**
   * Starts the remote agent on a new channel (installing it first if needed), marker already seen.
   * `session`: the conversation belongs to a resumable exec with this token. Its loss then closes
   * the channel without an error frame (the wrapper re-attaches instead), and a broker that sees
   * the client go away while the link is down has the exec abandoned once it is back.
   * `reattach`: the conversation re-attaches to that exec (a broker waits for the link meanwhile,
   * and the client for the broker until `waitUntil`: a client giving up on a waiting broker would
   * look to it like a dead wrapper).
   */
  openAgent(opts?: AgentOpenOptions): Promise<AgentChannel>;
  /**
   * Starts the agent's PTY entry point on a channel with a server-side pseudo-terminal of the
   * given size: `node agent.cjs <args…>`. `args` must carry no user data (tokens only).
   */
  openPty(args: string[], pty: PtyRequest): Promise<PtyChannel>;
  /** One request/response conversation with a fresh agent channel; the answer is checked for `op`. */
  call<Op extends OneShotOp>(op: Op, fields: OpRequest<Op>, timeoutMs?: number): Promise<AgentAnswer<Op>>;
  close(): void;
}

/** The first frame of a conversation with `host`'s agent: the one place `root` is added. */
export function requestFor<Op extends OneShotOp>(host: Pick<RemoteHost, "root">, op: Op, fields: OpRequest<Op>): AgentRequest<Op>;
export function requestFor(host: Pick<RemoteHost, "root">, op: "exec.run", fields: ExecRunRequest): AgentRequest<"exec.run">;
export function requestFor(host: Pick<RemoteHost, "root">, op: "exec.attach", fields: ExecAttachRequest): AgentRequest<"exec.attach">;
export function requestFor(host: Pick<RemoteHost, "root">, op: AgentOp, fields: object): object {
  return { op, root: host.root, ...fields };
}

/** One request/response conversation on a fresh agent channel: the body of every `call`. */
export async function callAgent<Op extends OneShotOp>(
  host: Pick<RemoteHost, "root" | "openAgent">,
  op: Op,
  fields: OpRequest<Op>,
  timeoutMs?: number,
): Promise<AgentAnswer<Op>> {
  const ch = await host.openAgent();
  try {
    return await ch.request(requestFor(host, op, fields), timeoutMs);
  } finally {
    ch.end();
  }
}
