// The v1 wire shapes Paseo and this runtime exchange (docs/contract.md#schemas), as strict zod schemas.
// Field order in every object IS the canonical encoding order (docs/contract.md#encoding): parsing rebuilds objects in
// shape order, so do not reorder fields here. Every object rejects unknown keys; the only open
// maps are `options` (JSON values) and `env` / `lifecycleEnvironment` (strings).
// This module holds the responses and re-exports every other schema; the exec wrapper and the
// request-reading operations import exec-schemas.ts and lifecycle-schemas.ts directly, so they
// construct only the zod schemas they use.
import * as z from "./zod-mini.js";
import { EnvironmentSchema, ProtocolVersionSchema, discriminated, type OptionsSchema } from "./schema-base.js";
import type {
  CreateInputSchema,
  LifecycleRequestSchema,
  PlacementIntentSchema,
  ProjectSourceSchema,
  ResolvedWorktreeSourceSchema,
} from "./lifecycle-schemas.js";
import type {
  ControlFrameSchema,
  EofEventSchema,
  ErrorEventSchema,
  ExitEventSchema,
  ProcessEventSchema,
  ProcessPurposeSchema,
  ResizeControlSchema,
  ResizedEventSchema,
  SignalControlSchema,
  SpawnControlSchema,
  StartedEventSchema,
  StdioSchema,
} from "./exec-schemas.js";

export { ProtocolVersionSchema, EnvironmentSchema, OptionsSchema } from "./schema-base.js";
export * from "./lifecycle-schemas.js";
export * from "./exec-schemas.js";

// ---- state, placement, inspection -------------------------------------------------------

export const CommandRuntimeStateSchema = z.strictObject({
  workspaceId: z.string(),
  lifecycle: z.enum(["ready", "paused"]),
  lifecycleEnvironment: z.optional(EnvironmentSchema),
});

export const PlacementSchema = z.strictObject({ cwd: z.string() });

export const InspectionSchema = discriminated(
  "status",
  [
    z.strictObject({ status: z.literal("missing") }),
    z.strictObject({ status: z.literal("paused"), state: CommandRuntimeStateSchema, placement: PlacementSchema }),
    z.strictObject({ status: z.literal("ready"), state: CommandRuntimeStateSchema, placement: PlacementSchema }),
    z.strictObject({ status: z.literal("error"), message: z.string() }),
  ],
  ["missing", "paused", "ready", "error"],
);

// ---- lifecycle responses, merge-to-base response ----------------------------------

export const StateResponseSchema = z.strictObject({
  type: z.literal("state"),
  protocolVersion: ProtocolVersionSchema,
  state: CommandRuntimeStateSchema,
  placement: PlacementSchema,
  materializedFreshContent: z.optional(z.boolean()),
});
export const InspectionResponseSchema = z.strictObject({
  type: z.literal("inspection"),
  protocolVersion: ProtocolVersionSchema,
  inspection: InspectionSchema,
});
export const OkResponseSchema = z.strictObject({ type: z.literal("ok"), protocolVersion: ProtocolVersionSchema });

export const LifecycleResponseSchema = discriminated(
  "type",
  [StateResponseSchema, InspectionResponseSchema, OkResponseSchema],
  ["state", "inspection", "ok"],
);

/** Our choice for the extra `merge-to-base` operation (docs/contract.md#extras). */
export const MergeToBaseResponseSchema = z.strictObject({
  type: z.literal("merge-to-base"),
  protocolVersion: ProtocolVersionSchema,
  localIntegrationTarget: z.string(),
});

/** Everything a non-exec operation may print on stdout (besides describe). */
export const OperationResponseSchema = discriminated(
  "type",
  [StateResponseSchema, InspectionResponseSchema, OkResponseSchema, MergeToBaseResponseSchema],
  ["state", "inspection", "ok", "merge-to-base"],
);

// ---- describe ---------------------------------------------------------------------------

export const DescribeResponseSchema = z.strictObject({
  protocolVersion: ProtocolVersionSchema,
  modes: z.array(z.enum(["pipes", "pty"])),
  reconcile: z._default(z.boolean(), false),
});

// ---- TypeScript types ------------------------------------------------------------------------

export type JsonValue = z.infer<typeof OptionsSchema>[string];
export type Options = z.infer<typeof OptionsSchema>;
export type Environment = z.infer<typeof EnvironmentSchema>;
export type ProjectSource = z.infer<typeof ProjectSourceSchema>;
export type ResolvedWorktreeSource = z.infer<typeof ResolvedWorktreeSourceSchema>;
export type PlacementIntent = z.infer<typeof PlacementIntentSchema>;
export type CreateInput = z.infer<typeof CreateInputSchema>;
export type LifecycleRequest = z.infer<typeof LifecycleRequestSchema>;
/** Exactly the public state Paseo sees (docs/contract.md#schemas); no physical details. */
export interface CommandRuntimeState {
  workspaceId: string;
  lifecycle: "ready" | "paused";
  lifecycleEnvironment?: Record<string, string>;
}
export type Placement = z.infer<typeof PlacementSchema>;
export type Inspection = z.infer<typeof InspectionSchema>;
export type StateResponse = z.infer<typeof StateResponseSchema>;
export type InspectionResponse = z.infer<typeof InspectionResponseSchema>;
export type OkResponse = z.infer<typeof OkResponseSchema>;
export type LifecycleResponse = z.infer<typeof LifecycleResponseSchema>;
export type MergeToBaseResponse = z.infer<typeof MergeToBaseResponseSchema>;
export type OperationResponse = z.infer<typeof OperationResponseSchema>;
/** Input form: `reconcile` may be omitted (it defaults to false). */
export type DescribeResponse = z.input<typeof DescribeResponseSchema>;
export type ProcessPurpose = z.infer<typeof ProcessPurposeSchema>;
export type Stdio = z.infer<typeof StdioSchema>;
export type SpawnControl = z.infer<typeof SpawnControlSchema>;
export type ResizeControl = z.infer<typeof ResizeControlSchema>;
export type SignalControl = z.infer<typeof SignalControlSchema>;
export type ControlFrame = z.infer<typeof ControlFrameSchema>;
export type StartedEvent = z.infer<typeof StartedEventSchema>;
export type EofEvent = z.infer<typeof EofEventSchema>;
export type ResizedEvent = z.infer<typeof ResizedEventSchema>;
export type ExitEvent = z.infer<typeof ExitEventSchema>;
export type ErrorEvent = z.infer<typeof ErrorEventSchema>;
export type ProcessEvent = z.infer<typeof ProcessEventSchema>;
