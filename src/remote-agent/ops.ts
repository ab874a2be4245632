// Registry of agent operations. Each feature area owns one module; this file only wires names.
import type { OpSpec } from "./context.js";
import { systemOps } from "./ops-system.js";
import { workspaceOps } from "./ops-workspace.js";
import { execOps } from "./ops-exec.js";

export const OPS: Record<string, OpSpec> = {
  ...systemOps,
  ...workspaceOps,
  ...execOps,
};
