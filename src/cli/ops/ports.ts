// `ports --workspace-id <id>` (ours): the host ports the workspace's processes listen on and where
// the broker forwards each on this machine, as one JSON line
// `{"ports":[{"hostPort","localPort","pid","argv0","since","named"}…]}` (`since`: ISO time it was first
// seen listening). The broker holds the forwards (docs/architecture.md "Notices"), so this asks it.
import { RuntimeError } from "../../shared/errors.js";
import { BrokerHost } from "../../broker/client/broker-host.js";
import type { CliOperation } from "../operation.js";
import { writeBytes } from "../write-bytes.js";
import { readWorkspaceRequest, withWorkspaceHost } from "../lifecycle-command.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const ctx = await readWorkspaceRequest(io.stdin, "ports", { workspaceId });
    const held = await withWorkspaceHost(ctx, (host) => {
      if (!(host instanceof BrokerHost)) {
        throw new RuntimeError("input", 'ports are forwarded by the broker; with the "broker" option false nothing is forwarded');
      }
      return host.notices("ports", workspaceId);
    });
    const ports = held.flatMap((n) =>
      Array.isArray(n.forwards)
        ? (n.forwards as Array<{ since: number }>).map((f) => ({ ...f, since: new Date(f.since).toISOString() }))
        : [],
    );
    await writeBytes(io.stdout, `${JSON.stringify({ ports })}\n`);
  },
};
export default operation;
