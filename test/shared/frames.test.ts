// Runtime <-> agent framing: a JSON message longer than one frame travels as JsonPart frames and
// a final Json frame and is decoded whole, however the bytes are chunked; a relay that re-encodes
// decoded frames (the broker) keeps it intact; an endless message is refused at its bound; a long
// stream of data frames keeps no chunk it has consumed reachable.
import { describe, expect, it } from "vitest";
import {
  BinaryFrameDecoder,
  FrameKind,
  MAX_FRAME_PAYLOAD,
  MAX_JSON_MESSAGE,
  encodeData,
  encodeFrame,
  encodeJson,
  encodeMessage,
  type Frame,
} from "../../src/shared/frames.js";
import { survivors } from "../support/reachable.js";

function decodeInChunks(bytes: Buffer, size: number): Frame[] {
  const d = new BinaryFrameDecoder();
  const out: Frame[] = [];
  for (let off = 0; off < bytes.length; off += size) out.push(...d.push(bytes.subarray(off, off + size)));
  expect(d.pending).toBe(0);
  return out;
}

describe("frames", () => {
  const big = { op: "exec.run", env: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`V${i}`, "é".repeat(60_000 + i)])) };

  it("a JSON message of several frames decodes whole, in any chunking, between data frames", () => {
    const json = encodeJson(big);
    expect(json.length).toBeGreaterThan(3 * MAX_FRAME_PAYLOAD);
    const stream = Buffer.concat([
      ...encodeData(FrameKind.Stdout, Buffer.from("before")),
      json,
      encodeFrame(FrameKind.Eof, Buffer.from([1])),
    ]);
    for (const size of [1 << 20, 65_536, 7_777]) {
      const frames = decodeInChunks(stream, size);
      expect(frames.map((f) => f.kind)).toEqual([FrameKind.Stdout, FrameKind.Json, FrameKind.Eof]);
      expect(JSON.parse(frames[1]!.payload.toString("utf8"))).toEqual(big);
    }
  });

  it("data frames decode intact whatever the chunking: headers split across chunks, a frame over many chunks", () => {
    const data = Buffer.from(Array.from({ length: MAX_FRAME_PAYLOAD + 12_345 }, (_, i) => (i * 7) & 0xff));
    const stream = Buffer.concat([
      ...encodeData(FrameKind.Stdin, data),
      encodeFrame(FrameKind.Eof, Buffer.from([0])),
      ...encodeData(FrameKind.Stdout, Buffer.alloc(0)),
    ]);
    for (const size of [3, 4_099, 32_768]) {
      const frames = decodeInChunks(stream, size);
      expect(frames.map((f) => f.kind)).toEqual([FrameKind.Stdin, FrameKind.Stdin, FrameKind.Eof]);
      expect(Buffer.concat(frames.slice(0, 2).map((f) => f.payload)).equals(data)).toBe(true);
    }
  });

  it("re-encoding decoded frames (the broker's relay) keeps a long message intact", () => {
    const [frame] = decodeInChunks(encodeJson(big), 1 << 16);
    const relayed = decodeInChunks(Buffer.concat(encodeMessage(frame!.kind, frame!.payload)), 1 << 16);
    expect(relayed).toHaveLength(1);
    expect(relayed[0]!.payload.equals(frame!.payload)).toBe(true);
  });

  it("a message of exactly one frame's payload is one Json frame", () => {
    const payload = Buffer.alloc(MAX_FRAME_PAYLOAD, 0x20);
    expect(encodeMessage(FrameKind.Json, payload)).toHaveLength(1);
    expect(encodeMessage(FrameKind.Json, Buffer.alloc(MAX_FRAME_PAYLOAD + 1, 0x20))).toHaveLength(2);
  });

  it("a JSON message that never ends is refused at its bound", () => {
    const d = new BinaryFrameDecoder();
    const part = encodeFrame(FrameKind.JsonPart, Buffer.alloc(MAX_FRAME_PAYLOAD, 0x20));
    expect(() => {
      for (let i = 0; i <= MAX_JSON_MESSAGE / MAX_FRAME_PAYLOAD; i++) d.push(part);
    }).toThrow(`JSON message longer than ${MAX_JSON_MESSAGE} bytes`);
  });

  it("a long stream whose frames span chunks keeps no consumed chunk reachable (a 300 MiB pack held 64 MiB of them)", async () => {
    // The create's object stream: 64 KiB + 5 byte frames arriving as 64 KiB mux payloads, so the
    // decoder is never empty between pushes.
    const frame = encodeFrame(FrameKind.Stdin, Buffer.alloc(64 * 1024, 1));
    const chunkSize = 64 * 1024;
    const d = new BinaryFrameDecoder();
    const refs: WeakRef<Buffer>[] = [];
    let carry = Buffer.alloc(0);
    let decoded = 0;
    for (let i = 0; i < 400; i++) {
      carry = Buffer.concat([carry, frame]);
      while (carry.length >= chunkSize) {
        const chunk = Buffer.from(carry.subarray(0, chunkSize));
        carry = carry.subarray(chunkSize);
        refs.push(new WeakRef(chunk));
        decoded += d.push(chunk).length;
      }
    }
    // 400 chunks hold 399 whole frames; the 400th waits for its last bytes.
    expect(decoded).toBe(399);
    expect(d.pending).toBeGreaterThan(0);
    // The chunk holding the unfinished frame's bytes, and nothing older.
    expect(await survivors(refs)).toBeLessThanOrEqual(2);
    expect(refs).toHaveLength(400);
  });
});
