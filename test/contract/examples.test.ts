// Every example of the contract's examples/v1.json (test/fixtures/v1.json) re-encodes to its `bytes` entry exactly, whatever the
// key order of the input object, and the canonical encoder's byte rules (docs/contract.md#encoding).
import { describe, expect, it } from "vitest";
import type * as z from "zod/mini";
import {
  ControlFrameSchema,
  DescribeResponseSchema,
  LifecycleRequestSchema,
  LifecycleResponseSchema,
  ProcessEventSchema,
  StateResponseSchema,
  encodeCanonical,
} from "../../src/contract/index.js";
import { RAW, V1_PATH, V1_TEXT, v1Examples } from "./vectors.js";
import { statSync } from "node:fs";

const SCHEMA_OF: Record<string, z.ZodMiniType> = {
  describeResponse: DescribeResponseSchema,
  lifecycleRequest: LifecycleRequestSchema,
  lifecycleResponse: LifecycleResponseSchema,
  pipeSpawnControl: ControlFrameSchema,
  ptySpawnControl: ControlFrameSchema,
  resizeControl: ControlFrameSchema,
  signalControl: ControlFrameSchema,
  startedEvent: ProcessEventSchema,
  eofEvent: ProcessEventSchema,
  resizedEvent: ProcessEventSchema,
  exitEvent: ProcessEventSchema,
  errorEvent: ProcessEventSchema,
};

const LENGTHS: Record<string, number> = {
  describeResponse: 63,
  lifecycleRequest: 370,
  lifecycleResponse: 161,
  pipeSpawnControl: 315,
  ptySpawnControl: 356,
  resizeControl: 66,
  signalControl: 57,
  startedEvent: 39,
  eofEvent: 35,
  resizedEvent: 46,
  exitEvent: 59,
  errorEvent: 72,
};

function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value)
        .reverse()
        .map(([k, v]) => [k, reverseKeys(v)]),
    );
  }
  return value;
}

describe("examples/v1.json", () => {
  it("is the verbatim 4599-byte file", () => {
    expect(statSync(V1_PATH).size).toBe(4599);
    expect(V1_TEXT.endsWith("}\n")).toBe(true);
  });

  const examples = v1Examples();
  it("covers every example that has bytes", () => {
    expect(Object.keys(examples.bytes).sort()).toEqual(Object.keys(SCHEMA_OF).sort());
    expect(
      Object.keys(examples)
        .filter((k) => k !== "bytes")
        .sort(),
    ).toEqual(Object.keys(SCHEMA_OF).sort());
  });

  for (const [name, schema] of Object.entries(SCHEMA_OF)) {
    it(`${name} re-encodes to its bytes`, () => {
      const bytes = encodeCanonical(schema, examples[name]);
      expect(bytes).toBe(examples.bytes[name]);
      expect(Buffer.byteLength(bytes)).toBe(LENGTHS[name]);
      expect(bytes.endsWith("}\n")).toBe(true);
    });
    it(`${name} re-encodes identically from reversed key order`, () => {
      const reversed = reverseKeys(examples[name]);
      expect(JSON.stringify(reversed)).not.toBe(JSON.stringify(examples[name]));
      expect(encodeCanonical(schema, reversed)).toBe(examples.bytes[name]);
    });
  }
});

describe("canonical encoder", () => {
  it("orders keys by schema, not input (state response given version first)", () => {
    const bytes = encodeCanonical(StateResponseSchema, {
      protocolVersion: 1,
      placement: { cwd: "/w" },
      state: { lifecycle: "paused", workspaceId: "w" },
      type: "state",
    });
    expect(bytes).toBe('{"type":"state","protocolVersion":1,"state":{"workspaceId":"w","lifecycle":"paused"},"placement":{"cwd":"/w"}}\n');
  });

  it("materialises the describe reconcile default", () => {
    expect(encodeCanonical(DescribeResponseSchema, { protocolVersion: 1, modes: ["pipes"] })).toBe(
      '{"protocolVersion":1,"modes":["pipes"],"reconcile":false}\n',
    );
  });

  it("omits undefined optionals", () => {
    const bytes = encodeCanonical(StateResponseSchema, {
      type: "state",
      protocolVersion: 1,
      state: { workspaceId: "w", lifecycle: "ready", lifecycleEnvironment: undefined },
      placement: { cwd: "/w" },
      materializedFreshContent: undefined,
    });
    expect(bytes).toBe('{"type":"state","protocolVersion":1,"state":{"workspaceId":"w","lifecycle":"ready"},"placement":{"cwd":"/w"}}\n');
  });

  it("keeps open maps in insertion order and raw UTF-8, escapes control characters", () => {
    const bytes = encodeCanonical(LifecycleRequestSchema, {
      options: { z: 1, a: { y: [true, null, "λ/é"], b: "x" }, m: "line\nbreak\t\u0000" },
      runtimeInstanceId: "r",
      protocolVersion: 1,
    });
    expect(bytes).toBe(
      '{"protocolVersion":1,"runtimeInstanceId":"r","options":{"z":1,"a":{"y":[true,null,"λ/é"],"b":"x"},"m":"line\\nbreak\\t\\u0000"}}\n',
    );
    expect(bytes.indexOf("\n")).toBe(bytes.length - 1);
  });

  it("places runtimeGeneration right after runtimeInstanceId", () => {
    const bytes = encodeCanonical(LifecycleRequestSchema, {
      options: {},
      runtimeGeneration: "gen-1",
      protocolVersion: 1,
      runtimeInstanceId: "r",
    });
    expect(bytes).toBe('{"protocolVersion":1,"runtimeInstanceId":"r","runtimeGeneration":"gen-1","options":{}}\n');
  });

  it("validates before writing", () => {
    expect(() => encodeCanonical(ProcessEventSchema, { type: "exit", protocolVersion: 1, code: 1.5, signal: null })).toThrow(
      /Refusing to write an invalid message: code: /,
    );
    expect(() => encodeCanonical(ProcessEventSchema, { type: "exit", protocolVersion: 1, code: 0 } as never)).toThrow(/signal/);
  });
});

describe("raw byte vectors", () => {
  it("match their textual descriptions", () => {
    expect(RAW.pipes.stdin.toString("latin1")).toBe("raw\u0000stdin\n");
    expect([...RAW.pipes.stdout]).toEqual([0x00, 0x6f, 0x75, 0x74, 0xff]);
    expect(RAW.pipes.stderr.toString("latin1")).toBe("err\u0000");
    expect(RAW.pty.stdin.toString("latin1")).toBe("term\u0000\u00ff");
    expect(RAW.pty.stdout.equals(RAW.pty.stdin)).toBe(true);
    expect(RAW.pty.stderr.toString("latin1")).toBe("pty\u0000");
  });
});
