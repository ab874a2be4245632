// `signal --workspace-id W --exec-id E --signal SIG` (contract §9): signals exactly that exec's
// verified workload tree on the remote and exits 0 only once it is gone. Paseo gives it 750 ms
// including our process start, so nothing here loads more than the transport and one agent call.
import { RuntimeError } from "../../shared/errors.js";
import { readLifecycleRequest } from "../lifecycle-input.js";
import type { CliOperation } from "../operation.js";
import { parseRuntimeOptions } from "../../transport/options.js";
import { withHost } from "../../workspace/host-call.js";

const SUPPORTED = new Set(["SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"]);
/** Bound for the whole agent exchange; Paseo gives up after 750 ms anyway. */
const SIGNAL_CALL_TIMEOUT_MS = 5000;

const operation: CliOperation = {
  requiredFlags: ["workspace-id", "exec-id", "signal"],
  async run(args, io) {
    const signal = args.flags.signal!;
    if (!SUPPORTED.has(signal)) throw new RuntimeError("input", `Unsupported signal: ${signal}`);
    const workspaceId = args.flags["workspace-id"]!;
    const request = await readLifecycleRequest(io.stdin, { operation: "signal", workspaceId });
    const options = parseRuntimeOptions(request.options);
    await withHost(options, (host) =>
      host.call(
        { op: "exec.signal", root: host.root, workspaceId, owner: request.runtimeInstanceId, execId: args.flags["exec-id"]!, signal },
        SIGNAL_CALL_TIMEOUT_MS,
      ),
    );
  },
};
export default operation;
