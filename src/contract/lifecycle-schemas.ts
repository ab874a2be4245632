// The lifecycle request Paseo writes on stdin (docs/contract.md#schemas) and the create input inside
// it. Field order is the canonical encoding order (see schemas.ts). Kept apart so operations that
// only read a request (signal) construct no response schema.
import * as z from "zod";
import { OptionsSchema, ProtocolVersionSchema, discriminated, nonEmpty } from "./schema-base.js";

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
