// FrameBoundary: the broker may add its own last frame to a relayed conversation only between two
// agent frames, whatever the chunking of the bytes it relayed.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { FrameBoundary, FrameKind, encodeFrame, encodeJson } from "../../src/shared/frames.js";

describe("FrameBoundary", () => {
  it("is at a boundary exactly after whole frames, for every split of the bytes", () => {
    const frames = [
      encodeJson({ type: "started" }),
      encodeFrame(FrameKind.Stdout, randomBytes(300)),
      encodeFrame(FrameKind.Eof, Buffer.from([1])),
    ];
    const bytes = Buffer.concat(frames);
    const ends = new Set<number>();
    let off = 0;
    for (const f of frames) ends.add((off += f.length));
    for (let split = 0; split <= bytes.length; split++) {
      const b = new FrameBoundary();
      b.push(bytes.subarray(0, split));
      expect(b.atBoundary).toBe(split === 0 || ends.has(split));
      b.push(bytes.subarray(split));
      expect(b.atBoundary).toBe(true);
    }
  });

  it("follows a stream pushed one byte at a time", () => {
    const bytes = Buffer.concat([encodeFrame(FrameKind.Stderr, Buffer.alloc(0)), encodeFrame(FrameKind.Stdout, Buffer.from("abc"))]);
    const b = new FrameBoundary();
    const seen: boolean[] = [];
    for (const byte of bytes) {
      b.push(Buffer.from([byte]));
      seen.push(b.atBoundary);
    }
    expect(seen.map((x, i) => (x ? i + 1 : 0)).filter(Boolean)).toEqual([5, bytes.length]);
  });
});
