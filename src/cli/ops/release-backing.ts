// `release-backing --workspace-id <id>` (extra, contract §14): removes a paused workspace's backing; refuses a ready one.
import type { CliOperation } from "../operation.js";
import { writeResponse } from "../respond.js";
import { callWorkspaceOp, readWorkspaceRequest } from "../../workspace/lifecycle-command.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "release-backing", { workspaceId });
    await callWorkspaceOp(ctx, "workspace.release-backing", workspaceId);
    await writeResponse(io.stdout, { type: "ok", protocolVersion: 1 });
  },
};
export default operation;
