// Placeholder for the `exec` operation so the dispatcher builds; the owning teammate replaces this file.
import { RuntimeError } from "../../errors.js";
import type { CliOperation } from "../operation.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  async run() {
    throw new RuntimeError("input", "exec is not implemented yet");
  },
};
export default operation;
