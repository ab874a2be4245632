// Paseo's fd4 phase machine (docs/contract.md#exec-ordering): started -> [resized…] -> eof -> exit, every violation
// fatal with a fixed text. The exec wrapper runs its own events through it before writing them, and
// tests use it to judge recorded fd4 streams.
import { RuntimeError } from "../shared/errors.js";
import { decodeFrames } from "./ndjson.js";
import { ProcessEventSchema } from "./exec-schemas.js";
import type { ExitEvent, ProcessEvent } from "./schemas.js";

export type StdioMode = "pipes" | "pty";
type Phase = "waiting-started" | "started" | "eof" | "exit";

export class Fd4PhaseMachine {
  private phase: Phase = "waiting-started";
  private exitEvent: ExitEvent | undefined;

  constructor(readonly mode: StdioMode) {}

  /** The authoritative result, once `exit` was accepted. */
  get exit(): ExitEvent | undefined {
    return this.exitEvent;
  }

  /** Throws the contract's text when `event` may not come now. `error` events are not phase-checked. */
  accept(event: ProcessEvent): void {
    if (this.phase === "exit") {
      fail(event.type === "exit" ? "Command runtime returned duplicate exit" : `Command runtime event after exit: ${event.type}`);
    }
    switch (event.type) {
      case "started":
        if (this.phase !== "waiting-started") fail("Command runtime returned duplicate started");
        this.phase = "started";
        return;
      case "resized":
        if (this.mode === "pipes") fail("pipes runtime returned resized event");
        if (this.phase === "waiting-started") fail("PTY runtime returned resized before started");
        if (this.phase === "eof") fail("PTY runtime returned resized after eof");
        return;
      case "eof":
        if (this.phase === "waiting-started") fail("Command runtime returned eof before started");
        if (this.phase === "eof") fail("Command runtime returned duplicate eof");
        this.phase = "eof";
        return;
      case "exit":
        if (this.phase === "waiting-started") fail("Command runtime returned exit before started");
        if (this.phase === "started") fail("Command runtime returned exit before eof");
        this.phase = "exit";
        this.exitEvent = event;
        return;
      case "error":
        return;
    }
  }

  /** Call at fd4 EOF: a stream without `exit` is incomplete. */
  end(): ExitEvent {
    if (!this.exitEvent) {
      fail(`${this.mode} wrapper ended without a valid fd4 exit event: incomplete started -> eof -> exit sequence`);
    }
    return this.exitEvent;
  }
}

function fail(message: string): never {
  throw new RuntimeError("input", message);
}

/**
 * Judges a complete fd4 stream the way Paseo does: decode every frame, run the phase machine, fail
 * on any `error` event with its message, and return the authoritative `exit`.
 */
export function checkFd4Stream(bytes: Uint8Array | string, mode: StdioMode): ExitEvent {
  const machine = new Fd4PhaseMachine(mode);
  for (const event of decodeFrames(bytes, ProcessEventSchema)) {
    machine.accept(event);
    if (event.type === "error") throw new RuntimeError("remote", event.message);
  }
  return machine.end();
}
