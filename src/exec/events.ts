// fd4 process events (docs/contract.md#exec-fd4): canonical bytes, validated, in the order Paseo's phase
// machine accepts (started → [resized…] → eof → exit). The writer itself refuses an out-of-order
// event, so a bug here cannot produce a sequence Paseo would reject with a confusing message.
import type { Writable } from "node:stream";
import { ProcessEventSchema } from "../contract/exec-schemas.js";
import { encodeCanonical } from "../contract/codec.js";
import { RuntimeError } from "../shared/errors.js";
import { endStream, flushed } from "./fds.js";

type Phase = "waiting" | "started" | "eof" | "exit" | "error";

export class EventWriter {
  private phase: Phase = "waiting";

  constructor(private readonly out: Writable) {}

  get started(): boolean {
    return this.phase !== "waiting";
  }

  get done(): boolean {
    return this.phase === "exit" || this.phase === "error";
  }

  private write(event: Parameters<typeof encodeCanonical<typeof ProcessEventSchema>>[1]): void {
    this.out.write(encodeCanonical(ProcessEventSchema, event));
  }

  private expect(phase: Phase, what: string): void {
    if (this.phase !== phase) throw new RuntimeError("remote", `internal error: fd4 ${what} in phase ${this.phase}`);
  }

  startedEvent(): void {
    this.expect("waiting", "started");
    this.write({ type: "started", protocolVersion: 1 });
    this.phase = "started";
  }

  resized(id: number): void {
    this.expect("started", "resized");
    this.write({ type: "resized", protocolVersion: 1, id });
  }

  async exit(code: number | null, signal: string | null): Promise<void> {
    this.expect("started", "eof");
    this.write({ type: "eof", protocolVersion: 1 });
    this.phase = "eof";
    this.write({ type: "exit", protocolVersion: 1, code, signal });
    this.phase = "exit";
    await endStream(this.out);
  }

  /** Fails the process in Paseo; nothing may follow. */
  async error(message: string): Promise<void> {
    if (this.done) return;
    this.write({ type: "error", protocolVersion: 1, message });
    this.phase = "error";
    await flushed(this.out);
    await endStream(this.out);
  }
}
