// The exec wire shapes (docs/contract.md#schemas): the fd3 spawn envelope and controls, the fd4
// events. Field order is the canonical encoding order (see schemas.ts). Kept apart so the exec
// wrapper constructs no lifecycle schema.
import * as z from "./zod-mini.js";
import {
  EnvironmentSchema,
  OptionsSchema,
  ProtocolVersionSchema,
  discriminated,
  nonEmpty,
  nonNegativeInt,
  positiveInt,
} from "./schema-base.js";

// ---- exec messages ----------------------------------------------------------------------

export const PROCESS_PURPOSE_KINDS = [
  "agent",
  "terminal",
  "git",
  "discovery",
  "workspace-helper",
  "workspace-script",
  "setup",
  "archive",
] as const;

export const ProcessPurposeSchema = discriminated(
  "kind",
  [
    z.strictObject({ kind: z.literal("agent") }),
    z.strictObject({ kind: z.literal("terminal") }),
    z.strictObject({ kind: z.literal("git") }),
    z.strictObject({ kind: z.literal("discovery") }),
    z.strictObject({ kind: z.literal("workspace-helper") }),
    z.strictObject({ kind: z.literal("workspace-script") }),
    z.strictObject({ kind: z.literal("setup") }),
    z.strictObject({ kind: z.literal("archive") }),
  ],
  PROCESS_PURPOSE_KINDS,
);

export const StdioSchema = discriminated(
  "kind",
  [
    z.strictObject({ kind: z.literal("pipes") }),
    z.strictObject({ kind: z.literal("pty"), rows: positiveInt, cols: positiveInt, term: z.optional(z.string()) }),
  ],
  ["pipes", "pty"],
);

export const SpawnControlSchema = z.strictObject({
  type: z.literal("spawn"),
  protocolVersion: ProtocolVersionSchema,
  runtimeInstanceId: nonEmpty,
  // Our choice (docs/contract.md#choices): tolerated here exactly as in lifecycle requests.
  runtimeGeneration: z.optional(nonEmpty),
  argv: z.array(z.string()).check(z.minLength(1)),
  cwd: z.optional(z.string()),
  env: EnvironmentSchema,
  purpose: ProcessPurposeSchema,
  options: OptionsSchema,
  execId: nonEmpty,
  stdio: StdioSchema,
});

// ---- fd3 controls ----------------------------------------------------------------------

export const ResizeControlSchema = z.strictObject({
  type: z.literal("resize"),
  protocolVersion: ProtocolVersionSchema,
  id: nonNegativeInt,
  rows: positiveInt,
  cols: positiveInt,
});
export const SignalControlSchema = z.strictObject({
  type: z.literal("signal"),
  protocolVersion: ProtocolVersionSchema,
  signal: z.string(),
});

export const ControlFrameSchema = discriminated(
  "type",
  [SpawnControlSchema, ResizeControlSchema, SignalControlSchema],
  ["spawn", "resize", "signal"],
);

// ---- fd4 events ------------------------------------------------------------------------

export const StartedEventSchema = z.strictObject({ type: z.literal("started"), protocolVersion: ProtocolVersionSchema });
export const EofEventSchema = z.strictObject({ type: z.literal("eof"), protocolVersion: ProtocolVersionSchema });
export const ResizedEventSchema = z.strictObject({
  type: z.literal("resized"),
  protocolVersion: ProtocolVersionSchema,
  id: nonNegativeInt,
});
export const ExitEventSchema = z.strictObject({
  type: z.literal("exit"),
  protocolVersion: ProtocolVersionSchema,
  code: z.nullable(z.int()),
  signal: z.nullable(z.string()),
});
export const ErrorEventSchema = z.strictObject({
  type: z.literal("error"),
  protocolVersion: ProtocolVersionSchema,
  message: z.string(),
});

export const ProcessEventSchema = discriminated(
  "type",
  [StartedEventSchema, EofEventSchema, ResizedEventSchema, ExitEventSchema, ErrorEventSchema],
  ["started", "eof", "resized", "exit", "error"],
);
