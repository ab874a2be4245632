// `destroy --workspace-id <id>`: kills the process set and removes the owned workspace directory (idempotent).
import type { CliOperation } from "../operation.js";
import { writeResponse } from "../respond.js";
import { callWorkspaceOp, readWorkspaceRequest } from "../../workspace/lifecycle-command.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "destroy", { workspaceId });
    await callWorkspaceOp(ctx, "workspace.destroy", workspaceId);
    await writeResponse(io.stdout, { type: "ok", protocolVersion: 1 });
  },
};
export default operation;
