// Placeholder for the `signal` operation so the dispatcher builds; the owning teammate replaces this file.
import { RuntimeError } from "../../errors.js";
import type { CliOperation } from "../operation.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id", "exec-id", "signal"],
  async run() {
    throw new RuntimeError("input", "signal is not implemented yet");
  },
};
export default operation;
