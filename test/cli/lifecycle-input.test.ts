// readLifecycleRequest in-process: accepted shapes, each refusal's exact text, and the bounds
// (16 MiB, 30 s) that keep a broken caller from hanging or exhausting the runtime.
import { PassThrough, Readable } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_REQUEST_BYTES, STDIN_TIMEOUT_MS, readLifecycleRequest } from "../../src/cli/lifecycle-input.js";
import { writeResponse } from "../../src/cli/respond.js";
import { DESCRIBE, DESCRIBE_BYTES } from "../../src/cli/ops/describe.js";
import { DescribeResponseSchema, encodeCanonical } from "../../src/contract/index.js";
import { RuntimeError } from "../../src/shared/errors.js";
import { TEST_RUNTIME_INSTANCE_ID, lifecycleRequest } from "../support/run-cli.js";
import { v1Examples } from "../contract/vectors.js";

const read = (text: string | Buffer[], opts: Parameters<typeof readLifecycleRequest>[1] = { operation: "inspect" }) =>
  readLifecycleRequest(Readable.from(typeof text === "string" ? [Buffer.from(text)] : text), opts);

async function refusal(promise: Promise<unknown>): Promise<RuntimeError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RuntimeError);
  expect((err as RuntimeError).errorClass).toBe("input");
  expect((err as RuntimeError).message).not.toContain("\n");
  return err as RuntimeError;
}

describe("readLifecycleRequest", () => {
  afterEach(() => vi.useRealTimers());

  it("accepts Paseo's create request (examples/v1.json bytes)", async () => {
    const { bytes } = v1Examples();
    const request = await read(bytes.lifecycleRequest!, { operation: "create", requireInput: true, workspaceId: "workspace-01" });
    expect(request.input?.purpose).toBe("discovery");
    expect(request.options).toEqual({});
  });

  it("accepts runtimeGeneration and open options, across chunk boundaries", async () => {
    const text = lifecycleRequest({ root: "/x", vendor: { nested: true } }, { runtimeGeneration: "gen-7" });
    const chunks = [Buffer.from(text.slice(0, 10)), Buffer.from(text.slice(10))];
    const request = await read(chunks);
    expect(request.runtimeGeneration).toBe("gen-7");
    expect(request.options).toEqual({ root: "/x", vendor: { nested: true } });
  });

  it("accepts reconcile's workspaceIds, including an empty list", async () => {
    const request = await read(lifecycleRequest({}, { workspaceIds: [] }), { operation: "reconcile", requireWorkspaceIds: true });
    expect(request.workspaceIds).toEqual([]);
  });

  const base = () => JSON.parse(lifecycleRequest()) as Record<string, unknown>;
  const cases: [string, string, string][] = [
    ["version 2", JSON.stringify({ ...base(), protocolVersion: 2 }), "unsupported protocol version 2; expected 1"],
    ["missing version", JSON.stringify({ ...base(), protocolVersion: undefined }), "unsupported protocol version undefined; expected 1"],
    ["string version", JSON.stringify({ ...base(), protocolVersion: "1" }), 'unsupported protocol version "1"; expected 1'],
    [
      "unknown key",
      JSON.stringify({ ...base(), unknownV1Field: "/private" }),
      'Invalid lifecycle request: Unrecognized key: "unknownV1Field"',
    ],
    ["missing options", JSON.stringify({ ...base(), options: undefined }), "Invalid lifecycle request: options: "],
    ["empty runtimeGeneration", JSON.stringify({ ...base(), runtimeGeneration: "" }), "Invalid lifecycle request: runtimeGeneration: "],
    ["array", "[1]", "Invalid lifecycle request: Invalid input: expected object, received array"],
    ["bad instance id", JSON.stringify({ ...base(), runtimeInstanceId: "abc" }), "Runtime instance id must be a SHA-256 identity"],
    ["malformed JSON", "{nope}", "Invalid request JSON: "],
    ["two values", lifecycleRequest() + lifecycleRequest(), "Invalid request JSON: "],
  ];
  for (const [name, text, message] of cases) {
    it(`refuses ${name}`, async () => {
      expect((await refusal(read(text))).message).toContain(message);
    });
  }

  it("names the nested path of an unknown key", async () => {
    const { lifecycleRequest: example } = v1Examples() as unknown as {
      lifecycleRequest: { input: { placement: Record<string, unknown> } };
    };
    example.input.placement.root = "/private";
    const err = await refusal(read(JSON.stringify(example), { operation: "create", requireInput: true }));
    expect(err.message).toBe('Invalid lifecycle request: input.placement: Unrecognized key: "root"');
  });

  it("checks the version before the schema", async () => {
    const err = await refusal(read(JSON.stringify({ ...base(), protocolVersion: 2, root: "/x" })));
    expect(err.message).toBe("unsupported protocol version 2; expected 1");
  });

  it("requires input for create and workspaceIds for reconcile", async () => {
    expect((await refusal(read(lifecycleRequest(), { operation: "create", requireInput: true }))).message).toBe("create input is required");
    expect((await refusal(read(lifecycleRequest(), { operation: "reconcile", requireWorkspaceIds: true }))).message).toMatch(
      /^reconcile needs workspaceIds/,
    );
  });

  it("requires input.workspaceId to equal --workspace-id", async () => {
    const { bytes } = v1Examples();
    const err = await refusal(read(bytes.lifecycleRequest!, { operation: "create", requireInput: true, workspaceId: "workspace-02" }));
    expect(err.message).toBe('create input.workspaceId "workspace-01" does not match --workspace-id "workspace-02"');
  });

  it("refuses nesting deeper than 64 levels anywhere, as input and without exhausting the stack", async () => {
    const nest = (n: number) => JSON.parse("[".repeat(n) + "]".repeat(n)) as string[];
    // 62 arrays inside options inside the request: 64 levels, accepted.
    expect((await read(lifecycleRequest({ v: nest(62) }))).options.v).toEqual(nest(62));
    for (const n of [63, 5000, 200_000]) {
      // Spliced into the text: encoding a value that deep would exhaust the stack here already.
      const text = lifecycleRequest({ v: "@" }).replace('"@"', "[".repeat(n) + "]".repeat(n));
      expect((await refusal(read(text))).message).toBe("Invalid request JSON: nested deeper than 64 levels");
    }
    // Brackets inside strings are text, not nesting.
    expect((await read(lifecycleRequest({ v: "[{".repeat(500) + '\\"' }))).options.v).toBe("[{".repeat(500) + '\\"');
  });

  it("refuses a request that is not valid UTF-8, even split across chunks, and keeps a character split across chunks", async () => {
    const text = Buffer.from(lifecycleRequest({ root: "~/r\u00e9" }));
    const at = text.indexOf(0xc3);
    expect((await read([text.subarray(0, at + 1), text.subarray(at + 1)])).options.root).toBe("~/r\u00e9");
    for (const bad of [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xc0, 0xaf]]) {
      const bytes = Buffer.concat([text.subarray(0, at), Buffer.from(bad), text.subarray(at + 2)]);
      expect((await refusal(read([bytes.subarray(0, at + 1), bytes.subarray(at + 1)]))).message).toBe(
        "Invalid request JSON: stdin is not valid UTF-8",
      );
    }
  });

  it("refuses more than 16 MiB and stops reading", async () => {
    const stream = new PassThrough();
    const pending = readLifecycleRequest(stream, { operation: "inspect" });
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    for (let i = 0; i <= MAX_REQUEST_BYTES / chunk.length; i++) stream.write(chunk);
    const err = await refusal(pending);
    expect(err.message).toBe("Request on stdin is larger than 16 MiB");
    expect(stream.destroyed).toBe(true);
  });

  it("gives up after 30 s when stdin never ends", async () => {
    vi.useFakeTimers();
    const stream = new PassThrough();
    stream.write(lifecycleRequest());
    const pending = readLifecycleRequest(stream, { operation: "inspect" });
    const outcome = refusal(pending);
    await vi.advanceTimersByTimeAsync(STDIN_TIMEOUT_MS - 1);
    expect(stream.destroyed).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect((await outcome).message).toBe("Timed out after 30 s waiting for the request on stdin to end");
    expect(stream.destroyed).toBe(true);
  });
});

describe("respond", () => {
  const capture = () => {
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on("data", (c: Buffer) => chunks.push(c));
    return { out, text: () => Buffer.concat(chunks).toString("utf8") };
  };

  it("writes canonical response bytes in schema order", async () => {
    const { out, text } = capture();
    await writeResponse(out, {
      materializedFreshContent: true,
      placement: { cwd: "/workspace" },
      state: { lifecycle: "ready", workspaceId: "workspace-01" },
      protocolVersion: 1,
      type: "state",
    });
    expect(text()).toBe(v1Examples().bytes.lifecycleResponse);
  });

  it("writes the merge-to-base response", async () => {
    const { out, text } = capture();
    await writeResponse(out, { localIntegrationTarget: "/home/u/p", protocolVersion: 1, type: "merge-to-base" });
    expect(text()).toBe('{"type":"merge-to-base","protocolVersion":1,"localIntegrationTarget":"/home/u/p"}\n');
  });

  it("refuses to write an invalid response and writes nothing", async () => {
    const { out, text } = capture();
    const state = { workspaceId: "w", lifecycle: "ready", root: "/home/u" } as never;
    await expect(writeResponse(out, { type: "state", protocolVersion: 1, state, placement: { cwd: "/" } })).rejects.toThrow(
      'Refusing to write an invalid message: state: Unrecognized key: "root"',
    );
    expect(text()).toBe("");
  });

  it("describe's constant bytes are DESCRIBE's canonical encoding", () => {
    expect(DESCRIBE_BYTES).toBe(encodeCanonical(DescribeResponseSchema, DESCRIBE));
    expect(DESCRIBE_BYTES).toBe(v1Examples().bytes.describeResponse);
  });
});

it("TEST_RUNTIME_INSTANCE_ID is a SHA-256 identity", () => {
  expect(TEST_RUNTIME_INSTANCE_ID).toMatch(/^[a-f0-9]{64}$/);
});
