// The lifecycle request Paseo writes on stdin (docs/contract.md#schemas) and the create input inside
// it. Field order is the canonical encoding order (see schemas.ts). Kept apart so operations that
// only read a request (signal) construct no response schema.
import * as z from "./zod-mini.js";
import { OptionsSchema, ProtocolVersionSchema, discriminated, nonEmpty } from "./schema-base.js";

// ---- project source ---------------------------------------------------------------------

export const DirectorySourceSchema = z.strictObject({ kind: z.literal("directory"), path: z.string() });
export const GitSourceSchema = z.strictObject({
  kind: z.literal("git"),
  url: z.string(),
  revision: z.string(),
  subdirectory: z.optional(z.string()),
});
export const ProjectSourceSchema = discriminated("kind", [DirectorySourceSchema, GitSourceSchema], ["directory", "git"]);

// ---- placement intent -------------------------------------------------------------------

export const CheckoutRefSchema = z.strictObject({ remoteName: z.optional(z.string()), remoteRef: z.string() });

export const ResolvedWorktreeSourceSchema = discriminated(
  "kind",
  [
    z.strictObject({ kind: z.literal("branch-off"), baseBranch: z.string(), branchName: z.string() }),
    z.strictObject({ kind: z.literal("checkout-branch"), branchName: z.string() }),
    z.strictObject({
      kind: z.enum(["checkout-change-request", "checkout-github-pr"]),
      forge: z.optional(z.string()),
      changeRequestNumber: z.optional(z.number()),
      githubPrNumber: z.optional(z.number()),
      headRef: z.string(),
      headRepositoryOwner: z.optional(z.string()),
      baseRefName: z.string(),
      checkoutRefs: z.optional(z.array(CheckoutRefSchema)),
      localBranchName: z.optional(z.string()),
      pushRemoteUrl: z.optional(z.string()),
      trackOriginHead: z.optional(z.boolean()),
    }),
  ],
  ["branch-off", "checkout-branch", "checkout-change-request", "checkout-github-pr"],
);

export const PlacementIntentSchema = discriminated(
  "kind",
  [
    z.strictObject({ kind: z.literal("existing"), relativeCwd: z.optional(z.string()) }),
    z.strictObject({
      kind: z.literal("branch"),
      branchName: z.string(),
      baseRef: z.string(),
      relativeCwd: z.optional(z.string()),
      worktreeSlug: z.optional(z.string()),
    }),
    z.strictObject({
      kind: z.literal("checkout"),
      ref: z.string(),
      relativeCwd: z.optional(z.string()),
      worktreeSlug: z.optional(z.string()),
    }),
    z.strictObject({
      kind: z.literal("resolved-worktree"),
      source: ResolvedWorktreeSourceSchema,
      worktreeSlug: z.string(),
      relativeCwd: z.optional(z.string()),
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
  purpose: z.optional(z.literal("discovery")),
  markFirstAgentBranchAutoName: z.optional(z.boolean()),
  seedPaseoConfigFrom: z.optional(z.string()),
});

export const LifecycleRequestSchema = z.strictObject({
  protocolVersion: ProtocolVersionSchema,
  runtimeInstanceId: nonEmpty,
  runtimeGeneration: z.optional(nonEmpty),
  input: z.optional(CreateInputSchema),
  options: OptionsSchema,
  workspaceIds: z.optional(z.array(z.string())),
});
