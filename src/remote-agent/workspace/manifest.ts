// The workspace manifest: the durable, host-side record that proves ownership and carries state.
// `inspect` is answered from it alone, so it must survive restarts of either side. Written
// atomically (temp file + rename) and validated strictly before any read or mutation.
export const MANIFEST_MARKER = "paseo-ssh-runtime/workspace-v1";

import type { IntegrationTarget, SealedRepo } from "../../shared/agent-api.js";

export type WorkspacePhase = "materializing" | "ready" | "paused";

export interface WorkspaceManifest {
  marker: typeof MANIFEST_MARKER;
  workspaceId: string;
  /** runtimeInstanceId of the Paseo that created it. */
  owner: string;
  phase: WorkspacePhase;
  /** Branch checked out (empty for a detached checkout). */
  branch: string;
  /** Commit materialized. */
  commit: string;
  /** Absolute canonical path of the workspace root (checkout or its subdirectory). */
  workspaceRoot: string;
  /** Key of the per-project object cache this workspace uses (for pruning), or null. */
  projectKey: string | null;
  lifecycleEnvironment: Record<string, string>;
  /** The pool runtime entry that created it (CreateRequest.scope); absent for a single host's. */
  scope?: string;
  /** Create purpose ("discovery" for short-lived probe workspaces), null for user workspaces. */
  purpose?: string | null;
  /** Where merge-to-base integrates (directory sources with a base branch only). */
  integration?: IntegrationTarget | null;
  /** Where the workspace's work comes back to on the Paseo side (directory sources). */
  workHome?: SealedRepo | null;
  createdAt: string;
  updatedAt: string;
}
