// Placeholder for the `signal` operation so the dispatcher builds; the owning teammate replaces this file.
// Like every lifecycle operation it validates the stdin request first, before any network use.
import { RuntimeError } from "../../errors.js";
import { readLifecycleRequest } from "../lifecycle-input.js";
import type { CliOperation } from "../operation.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id", "exec-id", "signal"],
  async run(args, io) {
    await readLifecycleRequest(io.stdin, { operation: "signal", workspaceId: args.flags["workspace-id"] });
    throw new RuntimeError("input", "signal is not implemented yet");
  },
};
export default operation;
