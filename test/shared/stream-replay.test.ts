// The resume layer's bookkeeping (pure logic): a replay log keeps exactly the unacknowledged frames
// and says what a peer holding everything up to `seq` lacks; a receive counter turns completions
// in any order into the cumulative point that may be acknowledged. (Which frames go unnumbered:
// exec-session-core.test.ts.)
import { describe, expect, it } from "vitest";
import { ReceiveCounter, ReplayLog } from "../../src/shared/stream-replay.js";
import { survivors } from "../support/reachable.js";

const b = (s: string) => Buffer.from(s);

describe("ReplayLog", () => {
  it("numbers frames from 1, drops them on cumulative acks and frees their weight", () => {
    const log = new ReplayLog();
    expect(log.append(b("a"), 10)).toBe(1);
    expect(log.append(b("b"))).toBe(2);
    expect(log.append(b("c"), 5)).toBe(3);
    expect(log.weight).toBe(15);
    expect(log.ack(2)).toBe(10);
    expect(log.length).toBe(1);
    expect(log.ack(2)).toBe(0); // repeated ack
    expect(log.ack(9)).toBe(0); // ack beyond what was sent is ignored
    expect(log.acked).toBe(2);
    expect(log.ack(3)).toBe(5);
    expect(log.weight).toBe(0);
    expect(log.length).toBe(0);
  });

  it("replays exactly the frames after what the peer holds; refuses a point it no longer has", () => {
    const log = new ReplayLog();
    for (const s of ["1", "2", "3", "4"]) log.append(b(s));
    log.ack(1);
    expect(log.after(2)?.map(String)).toEqual(["3", "4"]);
    expect(log.after(1)?.map(String)).toEqual(["2", "3", "4"]);
    expect(log.after(4)).toEqual([]);
    expect(log.after(0)).toBeNull();
  });

  it("stays correct across many appends and acks (compaction)", () => {
    const log = new ReplayLog();
    for (let i = 1; i <= 5000; i++) {
      log.append(b(String(i)), 1);
      if (i % 7 === 0) log.ack(i - 3);
    }
    expect(log.after(log.acked)?.map(String)).toEqual(Array.from({ length: 5000 - log.acked }, (_, i) => String(log.acked + i + 1)));
    expect(log.weight).toBe(5000 - log.acked);
  });

  it("keeps no acknowledged frame reachable (a busy exec's output held 64 MiB of them)", async () => {
    const log = new ReplayLog();
    const refs: WeakRef<Buffer>[] = [];
    for (let i = 0; i < 600; i++) {
      const frame = Buffer.alloc(64 * 1024, i & 0xff);
      refs.push(new WeakRef(frame));
      const seq = log.append(frame, frame.length);
      // One frame in flight at a time, as a window of one frame would allow.
      if (seq > 1) log.ack(seq - 1);
    }
    expect(log.length).toBe(1);
    expect(log.after(599)).toEqual([Buffer.alloc(64 * 1024, 599 & 0xff)]);
    expect(await survivors(refs)).toBe(1);
  });
});

describe("ReceiveCounter", () => {
  it("acknowledges only a gapless prefix of processed frames", () => {
    const c = new ReceiveCounter();
    const s1 = c.next(false); // e.g. stdin waiting for the pipe
    const s2 = c.next(true); // a signal, delivered at once
    const s3 = c.next(false);
    expect([s1, s2, s3]).toEqual([1, 2, 3]);
    expect(c.processed).toBe(0);
    expect(c.complete(s3)).toBe(false);
    expect(c.processed).toBe(0);
    expect(c.complete(s1)).toBe(true);
    expect(c.processed).toBe(3);
    expect(c.received).toBe(3);
    expect(c.next(true)).toBe(4);
    expect(c.processed).toBe(4);
    expect(c.complete(2)).toBe(false);
  });
});
