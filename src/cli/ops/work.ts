// `work --workspace-id <id>` (ours): brings the workspace's commits back into the Paseo side
// repository now (the live mirror does this by itself within seconds of a commit) and prints one
// JSON line saying where they are: the repository, the workspace's namespace
// (refs/paseo-ssh/<workspace>/…) and what happened to each branch's local counterpart.
import { writeBytes } from "../write-bytes.js";
import { readWorkspaceRequest, withWorkspaceHost } from "../lifecycle-command.js";
import type { CliOperation } from "../operation.js";
import { RuntimeError } from "../../shared/errors.js";
import { bringBack } from "../../mirror/bring-back.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "work", { workspaceId });
    const result = await withWorkspaceHost(ctx, async (host) => {
      const { state } = await host.call("workspace.work-state", { workspaceId, owner: ctx.owner, snapshot: false });
      if (!state) throw new RuntimeError("input", `SSH workspace is missing: ${workspaceId}`);
      if (!state.workHome) {
        throw new RuntimeError(
          "input",
          `workspace ${workspaceId} was not created from a local repository: its work stays on the host until it is destroyed`,
        );
      }
      return bringBack(host, state);
    });
    const { gitDir: repository, namespace, branches, bytes } = result;
    await writeBytes(io.stdout, `${JSON.stringify({ workspaceId, repository, namespace, branches, bytes })}\n`);
  },
};
export default operation;
