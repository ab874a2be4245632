// A RemoteHost that runs the bundled agent as a local child process. Used by unit tests of agent
// logic (no SSH involved); behaviour is always proven again through the real sshd.
import { spawn } from "node:child_process";
import { AgentChannel } from "../../src/transport/agent-channel.js";
import { bundledAgentPath } from "../../src/transport/bootstrap.js";
import { callAgent, type PtyChannel, type PtyRequest, type RemoteHost } from "../../src/transport/host.js";
import { RuntimeError } from "../../src/shared/errors.js";
import type { AgentAnswer, OneShotOp, OpRequest } from "../../src/shared/agent-api.js";

export class LocalHost implements RemoteHost {
  readonly reattachable = false;

  constructor(
    readonly root: string,
    private readonly agentPath = bundledAgentPath(),
  ) {}

  async openAgent(): Promise<AgentChannel> {
    const child = spawn(process.execPath, [this.agentPath], { stdio: ["pipe", "pipe", "pipe"] });
    const ch = new AgentChannel({ stdin: child.stdin, stdout: child.stdout, stderr: child.stderr, destroy: () => child.kill("SIGKILL") });
    await ch.ready;
    return ch;
  }

  async openPty(_args: string[], _pty: PtyRequest): Promise<PtyChannel> {
    throw new RuntimeError("input", "LocalHost has no PTY support");
  }

  call<Op extends OneShotOp>(op: Op, fields: OpRequest<Op>, timeoutMs?: number): Promise<AgentAnswer<Op>> {
    return callAgent(this, op, fields, timeoutMs);
  }

  close(): void {}
}
