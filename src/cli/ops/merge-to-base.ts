// `merge-to-base --workspace-id <id>` (extra, docs/contract.md#extras): brings the workspace's commits back to
// the Paseo-host repository and fast-forwards its base branch (src/workspace/fast-forward-base.ts);
// answers the trusted localIntegrationTarget, the repository path Paseo should refresh.
import type { CliOperation } from "../operation.js";
import { writeResponse } from "../respond.js";
import { readWorkspaceRequest, withWorkspaceHost } from "../lifecycle-command.js";
import { mergeToBase } from "../../workspace/fast-forward-base.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "merge-to-base", { workspaceId });
    const target = await withWorkspaceHost(ctx, (host) => mergeToBase(host, ctx.request.runtimeInstanceId, workspaceId));
    await writeResponse(io.stdout, { type: "merge-to-base", protocolVersion: 1, localIntegrationTarget: target });
  },
};
export default operation;
