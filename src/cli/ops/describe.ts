// `describe`: tells Paseo the protocol version and modes we speak (docs/contract.md#schemas, docs/contract.md#target).
// It takes no flags and never touches stdin (Paseo closes it without data).
import type { CliOperation } from "../operation.js";
import { writeDescribe } from "../respond.js";

const operation: CliOperation = {
  requiredFlags: [],
  async run(_args, io) {
    await writeDescribe(io.stdout);
  },
};
export default operation;
