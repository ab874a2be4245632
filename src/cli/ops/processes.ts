// `processes --workspace-id <id>` (diagnostic, ours): lists the workspace's live remote process
// set as one JSON line `{"processes":[{"pid","state","command"}…]}`. Tests use it to prove that
// pause stopped everything and that no orphan survives destroy.
import type { CliOperation } from "../operation.js";
import { writeBytes } from "../write-bytes.js";
import { callWorkspaceOp, readWorkspaceRequest } from "../lifecycle-command.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "processes", { workspaceId });
    const result = await callWorkspaceOp(ctx, "exec.processes", { workspaceId, owner: ctx.owner });
    await writeBytes(io.stdout, `${JSON.stringify(result)}\n`);
  },
};
export default operation;
