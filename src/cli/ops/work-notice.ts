// `work-notice` (internal): what the broker runs when the host reports that a workspace's refs
// moved (the live mirror; docs/architecture.md "Host notices"). Reads `{options, state}` on stdin:
// the broker's runtime options and the host's WorkState, brings that work back through the same
// broker, and exits. A workspace this machine did not seal (another Paseo's, on a shared host
// account) is none of its business: exit 0 without a word. Anything else that fails is one
// stderr line (the broker's log) and exit code of its class; the next move, or the next
// reconnect's first look, tries again.
import type { CliOperation } from "../operation.js";
import { readAll } from "../lifecycle-input.js";
import { RuntimeError } from "../../shared/errors.js";
import { parseJson } from "../../shared/guards.js";
import { WorkState } from "../../shared/agent-api.js";
import { parseRuntimeOptions } from "../../transport/options.js";
import { withHost } from "../../broker/open-host.js";
import { bringBack, sealedHome } from "../../mirror/bring-back.js";

const MAX_NOTICE_BYTES = 64 * 1024 * 1024;
const STDIN_TIMEOUT_MS = 30_000;

const operation: CliOperation = {
  requiredFlags: [],
  async run(_args, io) {
    const raw = parseJson(await readAll(io.stdin, MAX_NOTICE_BYTES, STDIN_TIMEOUT_MS)) as { options?: unknown; state?: unknown } | null;
    if (!raw || typeof raw !== "object" || !WorkState(raw.state)) throw new RuntimeError("input", "work-notice: malformed notice on stdin");
    const state = raw.state;
    if (sealedHome(state) === null) return 0;
    const options = parseRuntimeOptions(raw.options);
    const r = await withHost(options, (host) => bringBack(host, state));
    const moved = r.branches.filter((b) => b.local !== "unchanged" && b.local !== "left");
    if (r.bytes > 0 || moved.length > 0) {
      io.stderr.write(
        `work: workspace ${JSON.stringify(state.workspaceId)}: ${r.bytes} bytes into ${r.gitDir}${moved.map((b) => `, ${b.name} ${b.local}`).join("")}\n`,
      );
    }
    return 0;
  },
};
export default operation;
