// `reconcile`: removes this runtime instance's orphaned workspaces (ids Paseo no longer knows).
// Requires workspaceIds. Each orphan's work comes back first (src/mirror/keep-work.ts). With a leading `--verbose` (or PASEO_SSH_VERBOSE=1) each removal is
// reported as one stderr line; otherwise stderr stays empty. A pool is reconciled on every host at
// once (src/workspace/pool/pool-reconcile.ts).
import type { CliOperation } from "../operation.js";
import { writeResponse } from "../respond.js";
import { withWorkspaceHost } from "../lifecycle-command.js";
import { reconcileKeepingWork } from "../../mirror/keep-work.js";
import { readLifecycleRequest } from "../lifecycle-input.js";
import { parseRuntimeOptions } from "../../transport/options.js";
import { isPoolOptions } from "../../workspace/pool/detect.js";

const operation: CliOperation = {
  requiredFlags: [],
  async run(args, io) {
    const verbose = args.leading.includes("--verbose") || process.env.PASEO_SSH_VERBOSE === "1";
    const request = await readLifecycleRequest(io.stdin, { operation: "reconcile", requireWorkspaceIds: true });
    const owner = request.runtimeInstanceId;
    const workspaceIds = request.workspaceIds ?? [];
    if (isPoolOptions(request.options)) {
      const { reconcilePool } = await import("../../workspace/pool/pool-reconcile.js");
      const out = { stderr: io.stderr, operation: "reconcile", freeze: true };
      await reconcilePool(request.options, owner, workspaceIds, { stderr: io.stderr, verbose }, (host, fields, timeoutMs) =>
        reconcileKeepingWork(host, fields, out, timeoutMs),
      );
    } else {
      const ctx = { request, options: parseRuntimeOptions(request.options), owner };
      const out = { stderr: io.stderr, operation: "reconcile", freeze: true };
      const result = await withWorkspaceHost(ctx, (host) => reconcileKeepingWork(host, { owner, workspaceIds }, out));
      if (verbose) {
        for (const r of result.removed)
          io.stderr.write(`reconcile: removed orphaned workspace ${JSON.stringify(r.workspaceId)} (${r.dir})\n`);
      }
    }
    await writeResponse(io.stdout, { type: "ok", protocolVersion: 1 });
  },
};
export default operation;
