// `merge-to-base --workspace-id <id>` (extra, contract §14): verifies ownership like every other
// operation, then refuses: v1 of this runtime does not merge remote work into the Paseo host.
import type { CliOperation } from "../operation.js";
import { callWorkspaceOp, readWorkspaceRequest } from "../../workspace/lifecycle-command.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "merge-to-base", { workspaceId });
    // The agent op always fails: with the ownership text, or with the documented refusal.
    await callWorkspaceOp(ctx, "workspace.merge-to-base", workspaceId);
  },
};
export default operation;
