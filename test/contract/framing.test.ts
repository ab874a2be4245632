// docs/contract.md#framing and #exec-ordering: NDJSON decoding (any chunking, non-fatal UTF-8, exact framing errors) and the
// fd4 phase machine with each violation's exact text.
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import {
  ControlFrameSchema,
  Fd4PhaseMachine,
  checkFd4Stream,
  FrameDecoder,
  ProcessEventSchema,
  decodeFrames,
  readFrames,
  type ProcessEvent,
  type StdioMode,
} from "../../src/contract/index.js";
import { FRAMES, v1Examples } from "./vectors.js";

const { bytes } = v1Examples();
const enc = (s: string) => Buffer.from(s, "utf8");

function decodeInChunks(data: Buffer, sizes: number[]): ProcessEvent[] {
  const decoder = new FrameDecoder(ProcessEventSchema);
  const events: ProcessEvent[] = [];
  let offset = 0;
  for (const size of sizes) {
    events.push(...decoder.push(data.subarray(offset, offset + size)));
    offset += size;
  }
  events.push(...decoder.push(data.subarray(offset)));
  decoder.end();
  return events;
}

describe("FrameDecoder", () => {
  const conversation = enc(bytes.startedEvent! + bytes.eofEvent! + bytes.exitEvent!);

  it("decodes an exit frame split after 11 bytes into one event", () => {
    const events = decodeInChunks(enc(bytes.exitEvent!), [11]);
    expect(events).toEqual([{ type: "exit", protocolVersion: 1, code: 0, signal: null }]);
  });

  it("decodes started+eof+exit split after 13 bytes into three events", () => {
    expect(decodeInChunks(conversation, [13]).map((e) => e.type)).toEqual(["started", "eof", "exit"]);
  });

  it("decodes the same stream fed one byte at a time", () => {
    const sizes = Array.from({ length: conversation.length }, () => 1);
    expect(decodeInChunks(conversation, sizes).map((e) => e.type)).toEqual(["started", "eof", "exit"]);
  });

  it("keeps a multi-byte character split across chunks", () => {
    const frame = enc('{"type":"error","protocolVersion":1,"message":"héllo λ"}\n');
    const cut = frame.indexOf(0xce) + 1; // inside λ (0xce 0xbb)
    const [event] = decodeInChunks(frame, [cut]);
    expect(event).toEqual({ type: "error", protocolVersion: 1, message: "héllo λ" });
  });

  it("turns invalid UTF-8 into U+FFFD instead of failing", () => {
    const frame = Buffer.concat([enc('{"type":"error","protocolVersion":1,"message":"a'), Buffer.from([0xff]), enc('b"}\n')]);
    expect(decodeFrames(frame, ProcessEventSchema)).toEqual([{ type: "error", protocolVersion: 1, message: "a\ufffdb" }]);
  });

  it("tolerates \\r before the newline (JSON.parse whitespace)", () => {
    expect(decodeFrames('{"type":"eof","protocolVersion":1}\r\n', ProcessEventSchema)).toEqual([{ type: "eof", protocolVersion: 1 }]);
  });

  it("rejects an empty frame", () => {
    expect(() => decodeFrames(bytes.startedEvent + "\n", ProcessEventSchema)).toThrow("Command runtime message frame is empty");
  });

  it("rejects a frame missing its final newline", () => {
    expect(() => decodeFrames(bytes.exitEvent!.trimEnd(), ProcessEventSchema)).toThrow(/ended before newline/);
    expect(() => decodeFrames(bytes.exitEvent!.trimEnd(), ProcessEventSchema)).toThrow("Command runtime message ended before newline");
  });

  it("rejects a dangling partial UTF-8 sequence at end of stream", () => {
    expect(() => decodeFrames(Buffer.concat([enc(bytes.eofEvent!), Buffer.from([0xce])]), ProcessEventSchema)).toThrow(
      /ended before newline/,
    );
  });

  it("rejects version 2 frames with /expected 1/", () => {
    for (const frame of FRAMES.wrongVersion) expect(() => decodeFrames(frame, ProcessEventSchema)).toThrow(/expected 1/);
  });

  it("passes malformed JSON through as a native SyntaxError", () => {
    for (const frame of FRAMES.malformed) expect(() => decodeFrames(frame, ProcessEventSchema)).toThrow(SyntaxError);
  });

  it("names the valid event types for an unknown discriminator", () => {
    expect(() => decodeFrames(FRAMES.unknownDiscriminator, ProcessEventSchema)).toThrow(
      "Invalid discriminator value. Expected 'started' | 'eof' | 'resized' | 'exit' | 'error'",
    );
  });

  it("rejects unknown keys", () => {
    expect(() => decodeFrames('{"type":"started","protocolVersion":1,"root":"/x"}\n', ProcessEventSchema)).toThrow(/unrecognized key/i);
  });

  it("refuses __proto__ keys instead of silently dropping them", () => {
    const frame = bytes.pipeSpawnControl!.replace('"env":{', '"env":{"__proto__":"x",');
    expect(() => decodeFrames(frame, ControlFrameSchema)).toThrow('JSON key "__proto__" is not accepted');
  });

  it("reads frames from a stream of arbitrary chunks", async () => {
    const data = enc(bytes.ptySpawnControl! + bytes.resizeControl! + bytes.signalControl!);
    const chunks = [data.subarray(0, 7), data.subarray(7, 300), data.subarray(300)];
    const frames = [];
    for await (const frame of readFrames(Readable.from(chunks), ControlFrameSchema)) frames.push(frame.type);
    expect(frames).toEqual(["spawn", "resize", "signal"]);
  });

  it("readFrames fails on a trailing partial frame", async () => {
    const read = async () => {
      for await (const _ of readFrames(Readable.from([enc(bytes.signalControl + "{")]), ControlFrameSchema)) void _;
    };
    await expect(read()).rejects.toThrow("Command runtime message ended before newline");
  });
});

const ev = {
  started: { type: "started", protocolVersion: 1 },
  eof: { type: "eof", protocolVersion: 1 },
  resized: { type: "resized", protocolVersion: 1, id: 1 },
  exit: { type: "exit", protocolVersion: 1, code: 0, signal: null },
  error: { type: "error", protocolVersion: 1, message: "boom" },
} satisfies Record<string, ProcessEvent>;
type Name = keyof typeof ev;

function run(mode: StdioMode, names: Name[], end = false) {
  const machine = new Fd4PhaseMachine(mode);
  for (const name of names) machine.accept(ev[name]);
  return end ? machine.end() : machine.exit;
}

describe("Fd4PhaseMachine", () => {
  it("accepts the valid pipes and PTY sequences", () => {
    expect(run("pipes", ["started", "eof", "exit"], true)).toEqual(ev.exit);
    expect(run("pty", ["started", "resized", "resized", "eof", "exit"], true)).toEqual(ev.exit);
  });

  it("does not phase-check error events before exit", () => {
    expect(() => run("pipes", ["error", "started", "error", "eof", "error"])).not.toThrow();
  });

  const violations: [StdioMode, Name[], string][] = [
    ["pipes", ["started", "started"], "Command runtime returned duplicate started"],
    ["pipes", ["started", "eof", "started"], "Command runtime returned duplicate started"],
    ["pipes", ["eof"], "Command runtime returned eof before started"],
    ["pipes", ["started", "eof", "eof"], "Command runtime returned duplicate eof"],
    ["pipes", ["exit"], "Command runtime returned exit before started"],
    ["pipes", ["started", "exit"], "Command runtime returned exit before eof"],
    ["pipes", ["started", "eof", "exit", "exit"], "Command runtime returned duplicate exit"],
    ["pipes", ["started", "eof", "exit", "started"], "Command runtime event after exit: started"],
    ["pty", ["started", "eof", "exit", "resized"], "Command runtime event after exit: resized"],
    ["pipes", ["started", "eof", "exit", "error"], "Command runtime event after exit: error"],
    ["pipes", ["started", "resized"], "pipes runtime returned resized event"],
    ["pty", ["resized"], "PTY runtime returned resized before started"],
    ["pty", ["started", "eof", "resized"], "PTY runtime returned resized after eof"],
  ];
  for (const [mode, names, text] of violations) {
    it(`${mode} ${names.join(" -> ")}: ${text}`, () => {
      expect(() => run(mode, names)).toThrow(text);
    });
  }

  it("reports an fd4 EOF without exit for each mode", () => {
    expect(() => run("pipes", ["started", "eof"], true)).toThrow(
      "pipes wrapper ended without a valid fd4 exit event: incomplete started -> eof -> exit sequence",
    );
    expect(() => run("pty", [], true)).toThrow(
      "pty wrapper ended without a valid fd4 exit event: incomplete started -> eof -> exit sequence",
    );
  });

  it("judges a decoded PTY conversation ending with the SIGTERM exit vector", () => {
    const stream = bytes.startedEvent! + bytes.resizedEvent! + bytes.eofEvent! + FRAMES.ptyExitAfterSigterm;
    const machine = new Fd4PhaseMachine("pty");
    for (const event of decodeInChunks(enc(stream), [13, 11])) machine.accept(event);
    expect(machine.end()).toEqual({ type: "exit", protocolVersion: 1, code: null, signal: "SIGTERM" });
  });
});

describe("checkFd4Stream", () => {
  it("returns the exit of a valid pipes stream (the contract's example bytes)", () => {
    expect(checkFd4Stream(bytes.startedEvent! + bytes.eofEvent! + bytes.exitEvent!, "pipes")).toEqual(ev.exit);
  });
  it("fails with an error event's message", () => {
    expect(() => checkFd4Stream(bytes.startedEvent! + bytes.errorEvent!, "pipes")).toThrow("runtime control failed");
  });
  it("fails on an empty stream and on framing errors", () => {
    expect(() => checkFd4Stream("", "pipes")).toThrow("pipes wrapper ended without a valid fd4 exit event");
    expect(() => checkFd4Stream(bytes.startedEvent!.trimEnd(), "pty")).toThrow("Command runtime message ended before newline");
    expect(() => checkFd4Stream(bytes.startedEvent! + bytes.resizedEvent!, "pipes")).toThrow("pipes runtime returned resized event");
  });
});
