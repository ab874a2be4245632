// Pipes mode on the runtime side: fd0 goes to the agent as Stdin frames (EOF propagated), with a
// window of unacknowledged bytes so a workload that does not read its stdin stops us reading fd0
// instead of filling the channel; a resize control is an error.
import { FrameKind, encodeData, encodeFrame } from "../shared/frames.js";
import type { ExecAgentMessage } from "../shared/agent-api.js";
import { Conversation } from "./conversation.js";

/** Workload stdin sent to the agent but not yet taken by the workload; above this fd0 is not read. */
export const STDIN_WINDOW = 4 * 1024 * 1024;

export class PipesConversation extends Conversation {
  private stdinUnacked = 0;

  protected pumpStdin(): void {
    const stdin = this.io.stdin;
    stdin.on("data", (d: Buffer) => {
      this.ch.send(encodeData(FrameKind.Stdin, d));
      this.stdinUnacked += d.length;
      if (this.stdinUnacked > STDIN_WINDOW) stdin.pause();
    });
    stdin.on("end", () => this.ch.send(encodeFrame(FrameKind.Eof, Buffer.from([0]))));
    stdin.on("error", () => undefined);
  }

  protected onModeMessage(msg: ExecAgentMessage): void {
    if (msg.type !== "stdin-ack") return;
    this.stdinUnacked -= msg.bytes;
    if (this.stdinUnacked <= STDIN_WINDOW && this.io.stdin.isPaused()) this.io.stdin.resume();
  }

  protected onResize(): void {
    void this.fail("resize control in pipes mode");
  }
}
