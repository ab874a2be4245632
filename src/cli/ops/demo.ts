// Placeholder for the `demo` operation so the dispatcher builds; the owning teammate replaces this file.
import { RuntimeError } from "../../errors.js";
import type { CliOperation } from "../operation.js";

const operation: CliOperation = {
  requiredFlags: [],
  async run() {
    throw new RuntimeError("input", "demo is not implemented yet");
  },
};
export default operation;
