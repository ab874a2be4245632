// The agent's view of one request: the channel it arrived on (frames over stdin/stdout) and the
// host paths it may use. Op modules receive this and nothing else, so they can be tested by
// running the bundled agent as a local child process.
import type { Frame } from "../shared/frames.js";

export interface AgentRequest {
  op: string;
  /** Configured remote root (may start with "~/"); the agent expands it. */
  root: string;
  [key: string]: unknown;
}

export interface AgentContext {
  request: AgentRequest;
  /** Absolute, expanded root directory on this host. */
  root: string;
  /** Directory this agent build lives in (`<root>/agent/<hash>`). */
  agentDir: string;
  /** Absolute path of the node running this agent. */
  nodePath: string;
  /** Sends a JSON control frame to the runtime. */
  sendJson(value: unknown): void;
  /** Sends raw frames (already encoded). */
  sendRaw(buf: Buffer): void;
  /** Frames that arrive after the request frame. */
  onFrame(listener: (frame: Frame) => void): void;
  /** Called once when the runtime side closes its end (channel EOF or loss). */
  onClose(listener: () => void): void;
}

/**
 * An op either returns a value (sent as `{type:"result", value}`) or throws (sent as
 * `{type:"error", errorClass, message}`); streaming ops send their own frames and return undefined
 * with `streaming: true` so the dispatcher adds nothing.
 */
export type OpHandler = (ctx: AgentContext) => Promise<unknown>;
export interface OpSpec {
  handler: OpHandler;
  streaming?: boolean;
}
