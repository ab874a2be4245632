// Resumable exec streams: what both ends of one exec conversation (the wrapper on the Paseo host,
// the session in the host daemon) count, keep and acknowledge, so the conversation can move to a
// new stream after the link was lost without losing or repeating a frame.
//
//  * Implicit sequence numbers: every frame after the request is numbered by its position in its
//    direction (1, 2, …), whatever it carries (pipe or terminal bytes, events, controls), except
//    the two unnumbered control messages `ack` and `attached`. Both sides count; no number is sent
//    with a frame.
//  * Cumulative acks: `{type:"ack", seq}` says every numbered frame up to `seq` was processed
//    (down: handed to Paseo's fd1/fd2/fd4; up: taken by the workload, delivered, applied).
//  * Replay logs: a sender keeps every frame it sent until acked. Its size is bounded by the flow
//    control windows the senders already keep (output window on the daemon, stdin window in the
//    wrapper), so an outage makes the workload block instead of losing bytes.
//  * Attach: `exec.attach {token, received, gen}` → `attached {received}`; each side then replays
//    the frames the other does not hold, and the receiver skips nothing because it never saw them.
//  * Which frames are unnumbered, attach generations, the grace and loss rules, the daemon's
//    session and the broker's client-gone queue: src/shared/exec-session-core.ts.
// Built-ins only: the agent bundle uses this too.

/** A resume token: 128 random bits as hex. It travels only inside frames (never argv, files, logs). */
export const RESUME_TOKEN = /^[0-9a-f]{32}$/;

/** The number of the largest attach generation; a peer's larger one is refused as input. */
export const MAX_ATTACH_GEN = 2 ** 31 - 1;

interface Entry {
  seq: number;
  bytes: Buffer;
  /** What this frame counts against the sender's window (workload bytes; 0 for controls). */
  weight: number;
}

const SPENT: Entry = { seq: 0, bytes: Buffer.alloc(0), weight: 0 };

/** Frames sent and not yet acknowledged, in order. */
export class ReplayLog {
  private readonly entries: Entry[] = [];
  private head = 0;
  /** Sequence number of the last frame appended. */
  sent = 0;
  /** Highest cumulative ack received. */
  acked = 0;
  /** Sum of the weights still held. */
  weight = 0;

  /** Records the next frame; returns its sequence number. */
  append(bytes: Buffer, weight = 0): number {
    this.sent++;
    this.entries.push({ seq: this.sent, bytes, weight });
    this.weight += weight;
    return this.sent;
  }

  /** Drops frames up to `seq`; returns the weight freed. Acks beyond what was sent are ignored. */
  ack(seq: number): number {
    if (seq <= this.acked || seq > this.sent) return 0;
    this.acked = seq;
    let freed = 0;
    while (this.head < this.entries.length && this.entries[this.head]!.seq <= seq) {
      freed += this.entries[this.head]!.weight;
      // An acked frame must not stay reachable until the array is compacted: 1,024 of a busy
      // exec's 64 KiB output frames were 64 MiB kept alive.
      this.entries[this.head] = SPENT;
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries.splice(0, this.head);
      this.head = 0;
    }
    this.weight -= freed;
    return freed;
  }

  /** The frames after `seq` (what a peer that holds everything up to `seq` is missing), or null if some were already dropped. */
  after(seq: number): Buffer[] | null {
    if (seq < this.acked) return null;
    const out: Buffer[] = [];
    for (let i = this.head; i < this.entries.length; i++) if (this.entries[i]!.seq > seq) out.push(this.entries[i]!.bytes);
    return out;
  }

  /** Number of frames held. */
  get length(): number {
    return this.entries.length - this.head;
  }
}

/**
 * The receiving side: numbers incoming frames, tells whether one was already received (replayed
 * twice cannot happen by protocol, but a receiver never relies on that), and turns out-of-order
 * completions into the cumulative `processed` point that is acknowledged.
 */
export class ReceiveCounter {
  /** Last sequence number received. */
  received = 0;
  /** Every frame up to this one was processed. */
  processed = 0;
  private readonly pending: number[] = [];
  private readonly done = new Set<number>();

  /** Numbers the next received frame; `completes`: processed at once (nothing to wait for). */
  next(completes = false): number {
    const seq = ++this.received;
    if (completes && this.pending.length === 0) this.processed = seq;
    else {
      this.pending.push(seq);
      if (completes) this.complete(seq);
    }
    return seq;
  }

  /** Marks `seq` processed; returns true when `processed` advanced. */
  complete(seq: number): boolean {
    if (seq <= this.processed) return false;
    this.done.add(seq);
    const before = this.processed;
    while (this.pending.length > 0 && this.done.has(this.pending[0]!)) {
      this.processed = this.pending.shift()!;
      this.done.delete(this.processed);
    }
    return this.processed !== before;
  }
}
