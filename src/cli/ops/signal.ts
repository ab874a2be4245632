// `signal --workspace-id W --exec-id E --signal SIG` (docs/contract.md#signal): signals exactly that exec's
// verified workload tree on the remote and exits 0 only once it is gone. Paseo gives it 750 ms
// including our process start, so nothing here loads more than the transport and one agent call.
import { RuntimeError } from "../../shared/errors.js";
import { isExecSignal } from "../../shared/agent-api.js";
import type { CliOperation } from "../operation.js";
import { callWorkspaceOp, readWorkspaceRequest } from "../lifecycle-command.js";

/** Bound for the whole agent exchange; Paseo gives up after 750 ms anyway. */
const SIGNAL_CALL_TIMEOUT_MS = 5000;

const operation: CliOperation = {
  requiredFlags: ["workspace-id", "exec-id", "signal"],
  async run(args, io) {
    const signal = args.flags.signal!;
    if (!isExecSignal(signal)) throw new RuntimeError("input", `Unsupported signal: ${signal}`);
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "signal", { workspaceId });
    const execId = args.flags["exec-id"]!;
    await callWorkspaceOp(ctx, "exec.signal", { workspaceId, owner: ctx.owner, execId, signal }, SIGNAL_CALL_TIMEOUT_MS);
  },
};
export default operation;
