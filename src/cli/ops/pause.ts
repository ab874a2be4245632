// Placeholder for the `pause` operation so the dispatcher builds; the owning teammate replaces this file.
// Like every lifecycle operation it validates the stdin request first, before any network use.
import { RuntimeError } from "../../errors.js";
import { readLifecycleRequest } from "../lifecycle-input.js";
import type { CliOperation } from "../operation.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run(args, io) {
    await readLifecycleRequest(io.stdin, { operation: "pause", workspaceId: args.flags["workspace-id"] });
    throw new RuntimeError("input", "pause is not implemented yet");
  },
};
export default operation;
