// Placeholder for the `reconcile` operation so the dispatcher builds; the owning teammate replaces this file.
// Like every lifecycle operation it validates the stdin request first, before any network use.
import { RuntimeError } from "../../errors.js";
import { readLifecycleRequest } from "../lifecycle-input.js";
import type { CliOperation } from "../operation.js";

const operation: CliOperation = {
  requiredFlags: [],
  async run(args, io) {
    await readLifecycleRequest(io.stdin, { operation: "reconcile", requireWorkspaceIds: true });
    throw new RuntimeError("input", "reconcile is not implemented yet");
  },
};
export default operation;
