// `processes --workspace-id <id>` (diagnostic, ours): lists the workspace's live remote process
// set as one JSON line `{"processes":[{"pid","state","command"}…]}`. Tests use it to prove that
// pause stopped everything and that no orphan survives destroy (scenarios §2).
import type { CliOperation } from "../operation.js";
import { readLifecycleRequest } from "../lifecycle-input.js";
import { writeBytes } from "../respond.js";
import { parseRuntimeOptions } from "../../transport/options.js";
import { withHost } from "../../workspace/host-call.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const request = await readLifecycleRequest(io.stdin, { operation: "processes", workspaceId });
    const options = parseRuntimeOptions(request.options);
    const result = await withHost(options, (host) =>
      host.call({ op: "exec.processes", root: host.root, workspaceId, owner: request.runtimeInstanceId }),
    );
    await writeBytes(io.stdout, `${JSON.stringify(result)}\n`);
  },
};
export default operation;
