// `exec --workspace-id <id>`: the fd0–fd4 wrapper around one remote execution (src/exec/run-exec.ts).
import type { CliOperation } from "../operation.js";
import { openHost } from "../../broker/client/open-host.js";
import { runExec } from "../../exec/run-exec.js";

const operation: CliOperation = {
  requiredFlags: ["workspace-id"],
  run(args, io) {
    return runExec(args.flags["workspace-id"]!, io, { openHost });
  },
};
export default operation;
