// Registry of agent operations. Each feature area owns one module; this file only wires names,
// and its type (from the op table AGENT_OPS) makes every one-shot op need a handler answering its type.
import type { AgentContext, OneShotHandlers } from "./context.js";
import type { OneShotOp } from "../shared/agent-api.js";
import { systemOps } from "./system-ops.js";
import { loadOps } from "./pool-load-ops.js";
import { workspaceOps } from "./workspace/workspace-ops.js";
import { execAttach, execOps, execRun } from "./exec/exec-ops.js";
import { gitCredential } from "./workspace/git-credential-relay.js";

const ONE_SHOT: OneShotHandlers = {
  ...systemOps,
  ...loadOps,
  ...workspaceOps,
  ...execOps,
  "git.credential": gitCredential,
};

function isOneShot(op: string): op is OneShotOp {
  return Object.hasOwn(ONE_SHOT, op);
}

export interface OpEntry {
  handler: (ctx: AgentContext) => Promise<unknown>;
  /** Streaming ops send their own frames; one-shot ops' values are sent as `result`. */
  streaming: boolean;
}

export function lookupOp(op: string): OpEntry | undefined {
  if (op === "exec.run") return { handler: execRun, streaming: true };
  if (op === "exec.attach") return { handler: execAttach, streaming: true };
  return isOneShot(op) ? { handler: ONE_SHOT[op], streaming: false } : undefined;
}
