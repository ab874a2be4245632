// `inspect --workspace-id <id>`: the workspace's durable state, read from its remote manifest.
import type { CliOperation } from "../operation.js";
import { writeResponse } from "../respond.js";
import { callWorkspaceOp, readWorkspaceRequest } from "../../workspace/lifecycle-command.js";
import { inspectionResponse } from "../../workspace/public-state.js";
import type { InspectResult } from "../../workspace/agent-protocol.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "inspect", { workspaceId });
    const result = await callWorkspaceOp<InspectResult>(ctx, "workspace.inspect", workspaceId);
    await writeResponse(io.stdout, inspectionResponse(workspaceId, result));
  },
};
export default operation;
