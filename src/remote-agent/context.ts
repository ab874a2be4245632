// The agent's view of one request: the conversation it arrived on (frames over a mux stream of the
// host daemon, or stdin/stdout of a one-shot agent) and the host paths it may use. Op modules
// receive this and nothing else, so they can be tested by running the bundled agent as a local
// child process.
import type { Frame } from "../shared/frames.js";
import type { AgentAnswer, AgentMessage, OneShotOp } from "../shared/agent-api.js";

import type { ConversationEnd } from "../shared/exec-session-core.js";

/** How the runtime's side of a conversation ended (src/shared/exec-session-core.ts). */
export type { ConversationEnd };

/**
 * The request frame as it arrived: `op` and `root` are checked by the dispatcher; every other
 * field is checked by the op that reads it, with its request schema (the agent trusts no input).
 */
export interface ReceivedRequest {
  op: string;
  /** Configured remote root (may start with "~/"); the agent expands it. */
  root: string;
  [key: string]: unknown;
}

export interface AgentContext {
  request: ReceivedRequest;
  /** Absolute, expanded root directory on this host. */
  root: string;
  /** Directory this agent build lives in (`<root>/agent/<hash>`). */
  agentDir: string;
  /** Absolute path of the node running this agent. */
  nodePath: string;
  /** Sends a JSON control frame to the runtime. */
  sendJson(message: AgentMessage): void;
  /** Sends raw frames (already encoded); false once the channel wants draining (see `drained`). */
  sendRaw(buf: Buffer): boolean;
  /** Resolves once the channel to the runtime has drained (at once if it does not need to). */
  drained(): Promise<void>;
  /** Frames that arrive after the request frame. */
  onFrame(listener: (frame: Frame) => void): void;
  /** Stops (and resumes) taking frames from the runtime, so flow control holds the sender back. */
  pauseInput(): void;
  resumeInput(): void;
  /** Called once when the runtime side closes its end (EOF, or the conversation was lost). */
  onClose(listener: (how: ConversationEnd) => void): void;
}

/**
 * A one-shot op returns its answer (sent as `{type:"result", value}`) or throws (sent as
 * `{type:"error", errorClass, message}`).
 */
export type OneShotHandler<Op extends OneShotOp> = (ctx: AgentContext) => Promise<AgentAnswer<Op>>;
export type OneShotHandlers = { [Op in OneShotOp]: OneShotHandler<Op> };
