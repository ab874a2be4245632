// The v1 wire shapes Paseo and this runtime exchange (docs/contract.md#schemas), as strict zod schemas.
// Field order in every object IS the canonical encoding order (docs/contract.md#encoding): parsing rebuilds objects in
// shape order, so do not reorder fields here. Every object rejects unknown keys; the only open
// maps are `options` (JSON values) and `env` / `lifecycleEnvironment` (strings).
import * as z from "zod";

/** zod's discriminated unions name the valid tags in this exact text, which Paseo's tests match. */
function discriminated<const K extends string, const T extends readonly [z.core.$ZodTypeDiscriminable, ...z.core.$ZodTypeDiscriminable[]]>(
  key: K,
  options: T,
  tags: readonly string[],
) {
  const expected = tags.map((tag) => `'${tag}'`).join(" | ");
  return z.discriminatedUnion(key, options, {
    error: (issue) =>
      issue.code === "invalid_union" && issue.note === "No matching discriminator"
        ? `Invalid discriminator value. Expected ${expected}`
        : undefined,
  });
}

// ---- primitives -------------------------------------------------------------------------

export const ProtocolVersionSchema = z.literal(1);
export const EnvironmentSchema = z.record(z.string(), z.string());
export const OptionsSchema = z.record(z.string(), z.json());
const nonEmpty = z.string().min(1);
const positiveInt = z.int().positive();
const nonNegativeInt = z.int().nonnegative();

// ---- project source ---------------------------------------------------------------------

export const DirectorySourceSchema = z.strictObject({ kind: z.literal("directory"), path: z.string() });
export const GitSourceSchema = z.strictObject({
  kind: z.literal("git"),
  url: z.string(),
  revision: z.string(),
  subdirectory: z.string().optional(),
});
export const ProjectSourceSchema = discriminated("kind", [DirectorySourceSchema, GitSourceSchema], ["directory", "git"]);

// ---- placement intent -------------------------------------------------------------------

export const CheckoutRefSchema = z.strictObject({ remoteName: z.string().optional(), remoteRef: z.string() });

export const ResolvedWorktreeSourceSchema = discriminated(
  "kind",
  [
    z.strictObject({ kind: z.literal("branch-off"), baseBranch: z.string(), branchName: z.string() }),
    z.strictObject({ kind: z.literal("checkout-branch"), branchName: z.string() }),
    z.strictObject({
      kind: z.enum(["checkout-change-request", "checkout-github-pr"]),
      forge: z.string().optional(),
      changeRequestNumber: z.number().optional(),
      githubPrNumber: z.number().optional(),
      headRef: z.string(),
      headRepositoryOwner: z.string().optional(),
      baseRefName: z.string(),
      checkoutRefs: z.array(CheckoutRefSchema).optional(),
      localBranchName: z.string().optional(),
      pushRemoteUrl: z.string().optional(),
      trackOriginHead: z.boolean().optional(),
    }),
  ],
  ["branch-off", "checkout-branch", "checkout-change-request", "checkout-github-pr"],
);

export const PlacementIntentSchema = discriminated(
  "kind",
  [
    z.strictObject({ kind: z.literal("existing"), relativeCwd: z.string().optional() }),
    z.strictObject({
      kind: z.literal("branch"),
      branchName: z.string(),
      baseRef: z.string(),
      relativeCwd: z.string().optional(),
      worktreeSlug: z.string().optional(),
    }),
    z.strictObject({
      kind: z.literal("checkout"),
      ref: z.string(),
      relativeCwd: z.string().optional(),
      worktreeSlug: z.string().optional(),
    }),
    z.strictObject({
      kind: z.literal("resolved-worktree"),
      source: ResolvedWorktreeSourceSchema,
      worktreeSlug: z.string(),
      relativeCwd: z.string().optional(),
    }),
  ],
  ["existing", "branch", "checkout", "resolved-worktree"],
);

// ---- create input and lifecycle request ------------------------------------------

export const ProjectSchema = z.strictObject({ projectId: z.string(), source: ProjectSourceSchema });

export const CreateInputSchema = z.strictObject({
  workspaceId: z.string(),
  project: ProjectSchema,
  placement: PlacementIntentSchema,
  purpose: z.literal("discovery").optional(),
  markFirstAgentBranchAutoName: z.boolean().optional(),
  seedPaseoConfigFrom: z.string().optional(),
});

export const LifecycleRequestSchema = z.strictObject({
  protocolVersion: ProtocolVersionSchema,
  runtimeInstanceId: nonEmpty,
  runtimeGeneration: nonEmpty.optional(),
  input: CreateInputSchema.optional(),
  options: OptionsSchema,
  workspaceIds: z.array(z.string()).optional(),
});

// ---- state, placement, inspection -------------------------------------------------------

export const CommandRuntimeStateSchema = z.strictObject({
  workspaceId: z.string(),
  lifecycle: z.enum(["ready", "paused"]),
  lifecycleEnvironment: EnvironmentSchema.optional(),
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
  materializedFreshContent: z.boolean().optional(),
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
  reconcile: z.boolean().default(false),
});

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
    z.strictObject({ kind: z.literal("pty"), rows: positiveInt, cols: positiveInt, term: z.string().optional() }),
  ],
  ["pipes", "pty"],
);

export const SpawnControlSchema = z.strictObject({
  type: z.literal("spawn"),
  protocolVersion: ProtocolVersionSchema,
  runtimeInstanceId: nonEmpty,
  // Our choice (docs/contract.md#choices): tolerated here exactly as in lifecycle requests.
  runtimeGeneration: nonEmpty.optional(),
  argv: z.array(z.string()).min(1),
  cwd: z.string().optional(),
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
  code: z.int().nullable(),
  signal: z.string().nullable(),
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
