// `resume --workspace-id <id>`: continues the frozen process set and marks the workspace ready.
import type { CliOperation } from "../operation.js";
import { writeResponse } from "../respond.js";
import { callWorkspaceOp, readWorkspaceRequest } from "../../workspace/lifecycle-command.js";
import { stateResponse } from "../../workspace/public-state.js";
import type { WorkspaceView } from "../../workspace/agent-protocol.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "resume", { workspaceId });
    const view = await callWorkspaceOp<WorkspaceView>(ctx, "workspace.resume", workspaceId);
    await writeResponse(io.stdout, stateResponse(workspaceId, view));
  },
};
export default operation;
