// `create --workspace-id <id>`: materializes a workspace on the remote host (src/workspace/create-workspace.ts)
// and answers the state with materializedFreshContent.
import type { CliOperation } from "../operation.js";
import { writeResponse } from "../respond.js";
import { readWorkspaceRequest, withHost } from "../lifecycle-command.js";
import { prepareCreate, runCreate } from "../../workspace/create-workspace.js";
import { createProgress } from "../../workspace/progress.js";
import { stateResponse } from "../../workspace/public-state.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "create", { workspaceId, requireInput: true });
    const progress = createProgress(io.stderr);
    // Local resolution (and cwd validation) happens before any connection is opened.
    const prepared = await prepareCreate(ctx.request.input!, ctx.owner);
    const result = await withHost(ctx.options, (host) => runCreate(host, prepared, progress));
    await writeResponse(io.stdout, stateResponse(workspaceId, result.view, result.materializedFreshContent));
  },
};
export default operation;
