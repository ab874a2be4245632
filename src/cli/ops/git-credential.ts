// `git-credential` (internal): what the broker runs when git in a workspace on the host asks for a
// credential (forwardGitCredentials; an ask on the notices stream, src/broker/process/hand-off.ts).
// Reads `{options, target, ask}` on stdin from the broker that started it, over a private pipe;
// prints the answer (GitCredentialAnswer: a credential, or why there is none) as one JSON line on
// stdout, which goes back to the host and nowhere else. Never prints a credential to stderr (the
// broker's log).
import type { CliOperation } from "../operation.js";
import { readAll } from "../lifecycle-input.js";
import { RuntimeError } from "../../shared/errors.js";
import { isRecord, parseJson } from "../../shared/guards.js";
import { GitCredentialAsk } from "../../shared/agent-api.js";
import { answerCredentialAsk } from "../../workspace/forwarded-credentials.js";

const MAX_INPUT_BYTES = 1024 * 1024;
const STDIN_TIMEOUT_MS = 10_000;

const operation: CliOperation = {
  requiredFlags: [],
  async run(_args, io) {
    const input = parseJson(await readAll(io.stdin, MAX_INPUT_BYTES, STDIN_TIMEOUT_MS));
    if (!isRecord(input) || !isRecord(input.options) || !GitCredentialAsk(input.ask)) {
      throw new RuntimeError("input", "git-credential: malformed ask on stdin");
    }
    const answer = await answerCredentialAsk(input.ask, input.options.forwardGitCredentials === true);
    io.stdout.write(`${JSON.stringify(answer)}\n`);
    return 0;
  },
};
export default operation;
