// Placeholder for the `merge-to-base` operation so the dispatcher builds; the owning teammate replaces this file.
import { RuntimeError } from "../../errors.js";
import type { CliOperation } from "../operation.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run() {
    throw new RuntimeError("input", "merge-to-base is not implemented yet");
  },
};
export default operation;
