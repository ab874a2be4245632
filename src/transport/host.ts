// What the runtime's operations need from a remote host, independent of how it is reached:
// agent conversations (framed channels) and PTY channels. Implemented over ssh2 (ssh-host.ts),
// later through the shared per-host broker, and by LocalHost for tests of agent logic.
import type { AgentChannel } from "./agent-channel.js";
import type { Readable, Writable } from "node:stream";

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

export interface RemoteHost {
  /** Root directory as configured (may start with "~/"); sent in every agent request. */
  readonly root: string;
  /** Starts the remote agent on a new channel (installing it first if needed), marker already seen. */
  openAgent(): Promise<AgentChannel>;
  /**
   * Starts the agent's PTY entry point on a channel with a server-side pseudo-terminal of the
   * given size: `node agent.cjs <args…>`. `args` must carry no user data (tokens only).
   */
  openPty(args: string[], pty: PtyRequest): Promise<PtyChannel>;
  /** One request/response conversation with a fresh agent channel. */
  call<T = unknown>(req: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  close(): void;
}

/** One request/response conversation on a fresh agent channel: the body of every `call`. */
export async function callAgent<T>(
  host: Pick<RemoteHost, "root" | "openAgent">,
  req: Record<string, unknown>,
  timeoutMs?: number,
): Promise<T> {
  const ch = await host.openAgent();
  try {
    return await ch.request<T>({ root: host.root, ...req }, timeoutMs);
  } finally {
    ch.end();
  }
}
