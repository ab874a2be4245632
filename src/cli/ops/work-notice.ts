// `work-notice` (internal): what the broker runs when the host reports that a workspace's refs
// moved (the live mirror; src/broker/process/hand-off.ts). Reads `{options, target, notice}` on
// stdin: the broker's runtime options, its own socket (so this process connects back through that
// very broker), and the notice with the host's WorkState; brings that work back and exits. A
// workspace this machine did not seal (another Paseo's, on a shared host account) is none of its
// business: exit 0 without a word. Anything else that fails is one stderr line (the broker's log)
// and the exit code of its class; the broker tries again later.
import type { CliOperation } from "../operation.js";
import { readAll } from "../lifecycle-input.js";
import { RuntimeError } from "../../shared/errors.js";
import { isRecord, parseJson } from "../../shared/guards.js";
import { WorkState } from "../../shared/agent-api.js";
import type { RuntimeOptions } from "../../transport/options.js";
import { BrokerHost } from "../../broker/client/broker-host.js";
import type { BrokerTarget } from "../../broker/client/connect-broker.js";
import { bringBack, sealedHome } from "../../mirror/bring-back.js";

const MAX_NOTICE_BYTES = 64 * 1024 * 1024;
const STDIN_TIMEOUT_MS = 30_000;

const operation: CliOperation = {
  requiredFlags: [],
  async run(_args, io) {
    // From the broker that started this process, over a private pipe: its own options and paths.
    const input = parseJson(await readAll(io.stdin, MAX_NOTICE_BYTES, STDIN_TIMEOUT_MS));
    const notice = isRecord(input) ? input.notice : undefined;
    const state = isRecord(notice) ? notice.state : undefined;
    if (!isRecord(input) || !isRecord(input.options) || !isRecord(input.target) || !WorkState(state)) {
      throw new RuntimeError("input", "work-notice: malformed notice on stdin");
    }
    if (sealedHome(state) === null) return 0;
    const host = await new BrokerHost(input.options as unknown as RuntimeOptions, input.target as unknown as BrokerTarget, {
      noStart: true,
    }).connect();
    try {
      const r = await bringBack(host, state);
      const moved = r.branches.filter((b) => b.local === "created" || b.local === "moved");
      if (r.bytes > 0 || moved.length > 0) {
        io.stderr.write(
          `workspace ${JSON.stringify(state.workspaceId)}: ${r.bytes} bytes into ${r.gitDir}${moved.map((b) => `; ${b.name} ${b.local}`).join("")}\n`,
        );
      }
    } finally {
      host.close();
    }
    return 0;
  },
};
export default operation;
