// Pipes mode on the runtime side: fd0 goes to the agent as Stdin frames (EOF propagated), with a
// window of bytes the workload has not taken yet (they are also what the link keeps for replay), so
// a workload that does not read its stdin stops us reading fd0 instead of filling memory; a resize
// control is an error.
import { FrameKind, encodeData, encodeFrame } from "../shared/frames.js";
import { Conversation } from "./exec-conversation.js";

/** Workload stdin sent to the agent but not yet taken by the workload; above this fd0 is not read. */
export const STDIN_WINDOW = 4 * 1024 * 1024;

export class PipesConversation extends Conversation {
  protected pumpStdin(): void {
    const stdin = this.io.stdin;
    stdin.on("data", (d: Buffer) => {
      this.ch.send(encodeData(FrameKind.Stdin, d), d.length);
      if (this.ch.stdinUnacked > STDIN_WINDOW) stdin.pause();
    });
    stdin.on("end", () => this.ch.send(encodeFrame(FrameKind.Eof, Buffer.from([0]))));
    stdin.on("error", () => undefined);
    this.ch.on("stdinTaken", () => {
      if (this.ch.stdinUnacked <= STDIN_WINDOW && stdin.isPaused()) stdin.resume();
    });
  }

  protected onModeMessage(): void {}

  protected onResize(): void {
    void this.fail("resize control in pipes mode");
  }
}
