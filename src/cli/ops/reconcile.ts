// `reconcile`: removes this runtime instance's orphaned workspaces (ids Paseo no longer knows).
// Requires workspaceIds. With a leading `--verbose` (or PASEO_SSH_VERBOSE=1) each removal is
// reported as one stderr line; otherwise stderr stays empty.
import type { CliOperation } from "../operation.js";
import { writeResponse } from "../respond.js";
import { callWorkspaceOp, readWorkspaceRequest } from "../lifecycle-command.js";

const operation: CliOperation = {
  requiredFlags: [],
  async run(args, io) {
    const ctx = await readWorkspaceRequest(io.stdin, "reconcile", { requireWorkspaceIds: true });
    const workspaceIds = ctx.request.workspaceIds ?? [];
    const result = await callWorkspaceOp(ctx, "workspace.reconcile", { owner: ctx.owner, workspaceIds });
    if (args.leading.includes("--verbose") || process.env.PASEO_SSH_VERBOSE === "1") {
      for (const r of result.removed)
        io.stderr.write(`reconcile: removed orphaned workspace ${JSON.stringify(r.workspaceId)} (${r.dir})\n`);
    }
    await writeResponse(io.stdout, { type: "ok", protocolVersion: 1 });
  },
};
export default operation;
