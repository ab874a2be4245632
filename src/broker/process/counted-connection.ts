// An SSH connection that counts its open session channels, so the pool never opens more than the
// server allows (MaxSessions). sshd frees a session only once its channel closed both ways, and
// frees it on its next loop iteration, so an open refused right after a close is retried briefly.
import type { ClientChannel, PseudoTtyOptions } from "ssh2";
import { sleep } from "../../shared/async.js";
import { SshConnection } from "../../transport/ssh-connection.js";

/** Attempts at opening a session that sshd refused although our count says it has room. */
const SESSION_RETRIES = 6;

/** An SshConnection that knows how many session channels are open on it right now. */
export class CountedConnection extends SshConnection {
  openChannels = 0;
  constructor(
    base: SshConnection,
    private readonly onChange: () => void,
  ) {
    super(base.client, base.target, base.outer);
  }

  override async exec(command: string, pty?: PseudoTtyOptions, agentForward = false): Promise<ClientChannel> {
    this.openChannels++;
    let ch: ClientChannel;
    for (let attempt = 1; ; attempt++) {
      try {
        ch = await super.exec(command, pty, agentForward);
        break;
      } catch (err) {
        // An open that follows our close in the same packet batch can still find the table full.
        if (attempt < SESSION_RETRIES && !this.closed && /open failed/.test((err as Error).message)) {
          await sleep(25 * attempt);
          continue;
        }
        this.openChannels--;
        this.onChange();
        throw err;
      }
    }
    // The server frees the session only once the channel is closed both ways.
    ch.once("close", () => {
      this.openChannels--;
      this.onChange();
    });
    return ch;
  }
}
