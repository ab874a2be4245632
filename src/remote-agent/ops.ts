// Registry of agent operations. Each feature area owns one module; this file only wires names.
import type { OpSpec } from "./context.js";
import { systemOps } from "./ops-system.js";
import { workspaceOps } from "./workspace/ops.js";
import { execOps } from "./exec/ops.js";

export const OPS: Record<string, OpSpec> = {
  ...systemOps,
  ...workspaceOps,
  ...execOps,
};
