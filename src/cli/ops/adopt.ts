// `adopt --workspace-id <id> (--from-paseo-home <path> | --from-runtime-instance-id <hex>)`: our
// own tool (not in the contract) for moved Paseo homes. Ownership is bound to
// sha256(path.resolve(paseoHome)), so moving the home orphans every workspace; adopt re-owns one
// workspace for the runtime instance in the stdin lifecycle request, if its manifest names the old one.
import { createHash } from "node:crypto";
import { resolve } from "node:path";
import { RuntimeError } from "../../shared/errors.js";
import type { CliOperation } from "../operation.js";
import { writeResponse } from "../respond.js";
import { callWorkspaceOp, readWorkspaceRequest } from "../lifecycle-command.js";

const INSTANCE_ID = /^[a-f0-9]{64}$/;

function previousOwner(flags: Record<string, string>): string {
  const home = flags["from-paseo-home"];
  const id = flags["from-runtime-instance-id"];
  if ((home === undefined) === (id === undefined))
    throw new RuntimeError("input", "adopt needs exactly one of --from-paseo-home or --from-runtime-instance-id");
  if (home !== undefined) return createHash("sha256").update(resolve(home)).digest("hex");
  if (!INSTANCE_ID.test(id!)) throw new RuntimeError("input", "Runtime instance id must be a SHA-256 identity");
  return id!;
}

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  optionalFlags: ["from-paseo-home", "from-runtime-instance-id"],
  async run(args, io) {
    const workspaceId = args.flags["workspace-id"]!;
    const from = previousOwner(args.flags);
    const ctx = await readWorkspaceRequest(io.stdin, "adopt", { workspaceId });
    await callWorkspaceOp(ctx, "workspace.adopt", { workspaceId, owner: ctx.owner, from });
    await writeResponse(io.stdout, { type: "ok", protocolVersion: 1 });
  },
};
export default operation;
