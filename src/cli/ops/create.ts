// `create --workspace-id <id>`: materializes a workspace on the remote host (src/workspace/create-workspace.ts)
// and answers the state with materializedFreshContent. With a pool of hosts (`hosts` / `hostsCommand`),
// src/workspace/pool-create.ts first chooses the host.
import type { CliOperation } from "../operation.js";
import { writeResponse } from "../respond.js";
import { withHost } from "../lifecycle-command.js";
import { readLifecycleRequest } from "../lifecycle-input.js";
import { parseRuntimeOptions } from "../../transport/options.js";
import { prepareCreate, runCreate } from "../../workspace/create-workspace.js";
import { createProgress } from "../../workspace/progress.js";
import { stateResponse } from "../../workspace/public-state.js";
import { isPoolOptions } from "../../workspace/pool/detect.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const request = await readLifecycleRequest(io.stdin, { operation: "create", workspaceId, requireInput: true });
    const progress = createProgress(io.stderr);
    let result;
    if (isPoolOptions(request.options)) {
      result = await (await import("../../workspace/pool-create.js")).createInPool(request, request.options, progress);
    } else {
      const options = parseRuntimeOptions(request.options);
      // Local resolution (and cwd validation) happens before any connection is opened.
      const prepared = await prepareCreate(request.input!, request.runtimeInstanceId);
      result = await withHost(options, (host) => runCreate(host, prepared, progress, options));
    }
    await writeResponse(io.stdout, stateResponse(workspaceId, result.view, result.materializedFreshContent));
  },
};
export default operation;
