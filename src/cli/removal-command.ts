// destroy and release-backing: before the host removes a workspace's directory its work comes back
// to the Paseo side repository (src/mirror/keep-work.ts), and the removal names what was brought
// back so the host keeps anything else. Both answer `ok`; what was kept where is said on stderr.
import type { CliOperation } from "./operation.js";
import { okResponse, withWorkspaceHost, workspaceCommand } from "./lifecycle-command.js";
import { bringBackBeforeRemoval, noteArchived } from "../mirror/keep-work.js";

export function removalOperation(op: "workspace.destroy" | "workspace.release-backing"): CliOperation {
  const operation = op.slice("workspace.".length);
  return workspaceCommand(operation, async (ctx, workspaceId, io) => {
    // A paused workspace (release-backing's) is frozen already; one that is ready must stay running
    // when its release is refused.
    const out = { stderr: io.stderr, operation, freeze: op === "workspace.destroy" };
    const result = await withWorkspaceHost(ctx, async (host) => {
      const mirrored = await bringBackBeforeRemoval(host, workspaceId, ctx.owner, out);
      return host.call(op, { workspaceId, owner: ctx.owner, mirrored });
    });
    noteArchived(out, workspaceId, result.archived);
    if (op === "workspace.destroy" && ctx.hostLabel !== undefined) {
      (await import("../workspace/pool/pool-state.js")).removePlacement(ctx.owner, workspaceId);
    }
    return okResponse();
  });
}
