// docs/contract.md#schemas: every object is strict (injected `root` / `unknownV1Field` fail), the three open maps
// stay open, protocolVersion 2 fails everywhere, and public state never carries `root`.
import { describe, expect, expectTypeOf, it } from "vitest";
import type * as z from "zod/mini";
import {
  CommandRuntimeStateSchema,
  ControlFrameSchema,
  DescribeResponseSchema,
  InspectionSchema,
  LifecycleRequestSchema,
  LifecycleResponseSchema,
  PlacementSchema,
  ProcessEventSchema,
  ProcessPurposeSchema,
  StdioSchema,
  encodeCanonical,
  validateMessage,
  type CommandRuntimeState,
  PROCESS_PURPOSE_KINDS,
} from "../../src/contract/index.js";
import { v1Examples } from "./vectors.js";

type Json = Record<string, unknown>;
const clone = <T>(v: T): T => structuredClone(v);
/** These tests feed loosely typed JSON on purpose; the schema is the judge. */
const encode = (schema: z.ZodMiniType, value: unknown) => encodeCanonical(schema, value);
const ex = v1Examples();
const RID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

const state = { workspaceId: "w", lifecycle: "ready" };
const placement = { cwd: "/workspace" };
const request = { protocolVersion: 1, runtimeInstanceId: RID, options: {} };
const resolvedPlacement = {
  kind: "resolved-worktree",
  source: {
    kind: "checkout-github-pr",
    forge: "github",
    changeRequestNumber: 12.5,
    githubPrNumber: 12,
    headRef: "feature",
    headRepositoryOwner: "acme",
    baseRefName: "main",
    checkoutRefs: [{ remoteName: "origin", remoteRef: "refs/pull/12/head" }],
    localBranchName: "pr-12",
    pushRemoteUrl: "git@example.test:acme/p.git",
    trackOriginHead: true,
  },
  worktreeSlug: "pr-12",
  relativeCwd: "app",
};
const placements: Json[] = [
  { kind: "existing", relativeCwd: "app" },
  { kind: "branch", branchName: "b", baseRef: "main", relativeCwd: "app", worktreeSlug: "s" },
  { kind: "checkout", ref: "v1", relativeCwd: "app", worktreeSlug: "s" },
  resolvedPlacement,
];
const createWith = (input: Json): Json => {
  const message = clone(ex.lifecycleRequest) as Json & { input: Json };
  Object.assign(message.input, input);
  return message;
};
const spawn = clone(ex.ptySpawnControl) as Json;

interface Case {
  name: string;
  schema: z.ZodMiniType;
  message: unknown;
  /** Where to inject, inside `message`. */
  at: (string | number)[];
}

const cases: Case[] = [
  { name: "describe", schema: DescribeResponseSchema, message: ex.describeResponse, at: [] },
  ...[[], ["input"], ["input", "project"], ["input", "project", "source"], ["input", "placement"]].map((at) => ({
    name: `create request ${at.join(".") || "(root)"}`,
    schema: LifecycleRequestSchema,
    message: ex.lifecycleRequest,
    at,
  })),
  ...["inspect", "pause", "resume", "destroy", "signal", "reconcile"].map((op) => ({
    name: `${op} request`,
    schema: LifecycleRequestSchema,
    message: op === "reconcile" ? { ...request, workspaceIds: ["a"] } : request,
    at: [],
  })),
  {
    name: "directory source",
    schema: LifecycleRequestSchema,
    message: createWith({ project: { projectId: "p", source: { kind: "directory", path: "/src" } } }),
    at: ["input", "project", "source"],
  },
  ...placements.map((p) => ({
    name: `placement ${p.kind as string}`,
    schema: LifecycleRequestSchema,
    message: createWith({ placement: p }),
    at: ["input", "placement"],
  })),
  ...[
    { kind: "branch-off", baseBranch: "main", branchName: "b" },
    { kind: "checkout-branch", branchName: "b" },
    { kind: "checkout-change-request", headRef: "h", baseRefName: "main" },
    resolvedPlacement.source,
  ].map((source) => ({
    name: `resolved-worktree source ${source.kind}`,
    schema: LifecycleRequestSchema,
    message: createWith({ placement: { ...resolvedPlacement, source } }),
    at: ["input", "placement", "source"],
  })),
  {
    name: "checkoutRefs[0]",
    schema: LifecycleRequestSchema,
    message: createWith({ placement: resolvedPlacement }),
    at: ["input", "placement", "source", "checkoutRefs", 0],
  },
  { name: "state", schema: CommandRuntimeStateSchema, message: state, at: [] },
  { name: "placement", schema: PlacementSchema, message: placement, at: [] },
  ...[[], ["state"], ["placement"]].map((at) => ({
    name: `state response ${at.join(".") || "(root)"}`,
    schema: LifecycleResponseSchema,
    message: ex.lifecycleResponse,
    at,
  })),
  ...[[], ["inspection"], ["inspection", "state"], ["inspection", "placement"]].map((at) => ({
    name: `inspection response ${at.join(".") || "(root)"}`,
    schema: LifecycleResponseSchema,
    message: { type: "inspection", protocolVersion: 1, inspection: { status: "ready", state, placement } },
    at,
  })),
  { name: "ok response", schema: LifecycleResponseSchema, message: { type: "ok", protocolVersion: 1 }, at: [] },
  ...[
    { status: "missing" },
    { status: "paused", state: { ...state, lifecycle: "paused" }, placement },
    { status: "ready", state, placement },
    { status: "error", message: "broken" },
  ].map((inspection) => ({ name: `inspection ${inspection.status}`, schema: InspectionSchema, message: inspection, at: [] })),
  ...PROCESS_PURPOSE_KINDS.map((kind) => ({ name: `purpose ${kind}`, schema: ProcessPurposeSchema, message: { kind }, at: [] })),
  { name: "stdio pipes", schema: StdioSchema, message: { kind: "pipes" }, at: [] },
  { name: "stdio pty", schema: StdioSchema, message: { kind: "pty", rows: 24, cols: 80, term: "xterm" }, at: [] },
  ...[[], ["purpose"], ["stdio"]].map((at) => ({
    name: `spawn envelope ${at.join(".") || "(root)"}`,
    schema: ControlFrameSchema,
    message: spawn,
    at,
  })),
  { name: "resize control", schema: ControlFrameSchema, message: ex.resizeControl, at: [] },
  { name: "signal control", schema: ControlFrameSchema, message: ex.signalControl, at: [] },
  ...["startedEvent", "eofEvent", "resizedEvent", "exitEvent", "errorEvent"].map((name) => ({
    name,
    schema: ProcessEventSchema,
    message: ex[name],
    at: [],
  })),
];

function objectAt(message: unknown, at: (string | number)[]): Json {
  let node = message as Json;
  for (const key of at) node = (node as Record<string | number, unknown>)[key] as Json;
  if (!node || typeof node !== "object") throw new Error(`no object at ${at.join(".")}`);
  return node;
}

describe("strict objects", () => {
  for (const c of cases) {
    it(`${c.name} is valid before injection`, () => {
      expect(c.schema.safeParse(c.message).success).toBe(true);
    });
    for (const key of ["root", "unknownV1Field"]) {
      it(`${c.name} rejects an injected ${key}`, () => {
        const message = clone(c.message);
        objectAt(message, c.at)[key] = "/private";
        expect(() => validateMessage(c.schema, message)).toThrow(/unrecognized key/i);
        expect(() => validateMessage(c.schema, message)).toThrow(`Unrecognized key: "${key}"`);
      });
    }
  }

  it("reports the path of the offending object on one line", () => {
    const message = createWith({ placement: { kind: "existing", root: "/private" } });
    expect(() => validateMessage(LifecycleRequestSchema, message, "Invalid lifecycle request: ")).toThrow(
      'Invalid lifecycle request: input.placement: Unrecognized key: "root"',
    );
  });
});

describe("open maps", () => {
  it("options accept any keys and JSON values, also with runtimeGeneration", () => {
    const options = { root: "/anything", vendorExtension: { nested: true } };
    const message = { protocolVersion: 1, runtimeInstanceId: RID, runtimeGeneration: "gen-1", options };
    expect(encode(LifecycleRequestSchema, message)).toBe(
      `{"protocolVersion":1,"runtimeInstanceId":"${RID}","runtimeGeneration":"gen-1","options":{"root":"/anything","vendorExtension":{"nested":true}}}\n`,
    );
    expect(encode(ControlFrameSchema, { ...spawn, options })).toContain('"options":{"root":"/anything","vendorExtension":{"nested":true}}');
  });

  it("lifecycleEnvironment accepts root and vendor keys, bare and in responses", () => {
    const withEnv = { ...state, lifecycleEnvironment: { root: "/x", VENDOR_VALUE: "v" } };
    expect(CommandRuntimeStateSchema.safeParse(withEnv).success).toBe(true);
    const response = { type: "state", protocolVersion: 1, state: withEnv, placement };
    expect(encode(LifecycleResponseSchema, response)).toContain('"lifecycleEnvironment":{"root":"/x","VENDOR_VALUE":"v"}');
  });

  it("spawn env accepts root", () => {
    expect(encode(ControlFrameSchema, { ...spawn, env: { root: "/x" } })).toContain('"env":{"root":"/x"}');
  });

  it("env stays string-valued and options JSON-valued", () => {
    expect(ControlFrameSchema.safeParse({ ...spawn, env: { N: 1 } }).success).toBe(false);
    expect(LifecycleRequestSchema.safeParse({ ...request, options: { f: () => 1 } }).success).toBe(false);
  });
});

describe("protocolVersion 2 anywhere fails /expected 1/", () => {
  const versioned = cases.filter((c) => c.at.length === 0 && (c.message as Json).protocolVersion === 1);
  it("covers every top-level message kind", () => {
    expect(versioned.length).toBeGreaterThanOrEqual(15);
  });
  for (const c of versioned) {
    it(c.name, () => {
      const message = { ...(c.message as Json), protocolVersion: 2 };
      expect(() => validateMessage(c.schema, message)).toThrow(/expected 1/);
    });
  }
  it("pipes spawn too", () => {
    expect(() => validateMessage(ControlFrameSchema, { ...(ex.pipeSpawnControl as Json), protocolVersion: 2 })).toThrow(
      "protocolVersion: Invalid input: expected 1",
    );
  });
});

describe("public state", () => {
  it("rejects a computed root key, bare and nested in a state response", () => {
    const key = ["ro", "ot"].join("");
    const bare = { ...state, [key]: "/home/u/.paseo-ssh" };
    expect(() => validateMessage(CommandRuntimeStateSchema, bare)).toThrow(/unrecognized key/i);
    const response = { type: "state", protocolVersion: 1, state: bare, placement };
    expect(() => validateMessage(LifecycleResponseSchema, response)).toThrow('state: Unrecognized key: "root"');
    expect(() => encode(LifecycleResponseSchema, response)).toThrow(/unrecognized key/i);
  });

  it("CommandRuntimeState is exactly the contract's type", () => {
    expectTypeOf<z.infer<typeof CommandRuntimeStateSchema>>().toEqualTypeOf<CommandRuntimeState>();
    expectTypeOf<CommandRuntimeState>().toEqualTypeOf<{
      workspaceId: string;
      lifecycle: "ready" | "paused";
      lifecycleEnvironment?: Record<string, string>;
    }>();
  });
});

describe("discriminated unions", () => {
  it("name the valid tags on an unknown discriminator", () => {
    expect(() => validateMessage(ProcessEventSchema, { protocolVersion: 1, type: "invalid" })).toThrow(
      "Invalid discriminator value. Expected 'started' | 'eof' | 'resized' | 'exit' | 'error'",
    );
    expect(() => validateMessage(ControlFrameSchema, { protocolVersion: 1, type: "nope" })).toThrow(
      "type: Invalid discriminator value. Expected 'spawn' | 'resize' | 'signal'",
    );
    expect(() => validateMessage(ProcessPurposeSchema, { kind: "daemon" })).toThrow(/Invalid discriminator value/);
  });

  it("stdio pty needs positive integer rows/cols", () => {
    for (const bad of [
      { rows: 0, cols: 80 },
      { rows: 24, cols: 1.5 },
      { rows: -1, cols: 80 },
    ]) {
      expect(StdioSchema.safeParse({ kind: "pty", ...bad }).success).toBe(false);
    }
  });

  it("the change-request source kind is an enum of two names", () => {
    const source = { kind: "checkout-change-request", headRef: "h", baseRefName: "b" };
    const ok = (kind: string) =>
      LifecycleRequestSchema.safeParse(createWith({ placement: { ...resolvedPlacement, source: { ...source, kind } } })).success;
    expect(ok("checkout-change-request")).toBe(true);
    expect(ok("checkout-github-pr")).toBe(true);
    expect(ok("checkout-gitlab-mr")).toBe(false);
  });
});
