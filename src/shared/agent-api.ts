// The shapes exchanged between the runtime and the remote agent for workspace operations.
// Kept in one place so both bundles agree; physical details (paths, commits) stay inside this
// private protocol and never reach Paseo's public state.

import type { IntegrationTarget } from "../remote-agent/workspace/manifest.js";
export type { IntegrationTarget };

/** Objects for a directory source are shipped from the Paseo host into this project's cache. */
export interface DirectorySourceSpec {
  kind: "directory";
  /** sha256 of projectId + canonical source path (project-key.ts); names the remote cache. */
  projectKey: string;
  commit: string;
  /** Branch to check out ("" = detached at `commit`). */
  branch: string;
  /** Workspace root inside the checkout ("" = the checkout itself). */
  subdirectory: string;
}

/** Fetched by the agent on the remote host into a cache keyed by the URL. */
export interface GitSourceSpec {
  kind: "git";
  url: string;
  /** "" = the remote's default branch; a branch name; a tag or a commit sha (detached). */
  revision: string;
  /** Branch to create at the resolved commit ("" = keep what the revision gives). */
  newBranch: string;
  subdirectory: string;
}

export type SourceSpec = DirectorySourceSpec | GitSourceSpec;

/** Test-only delays (milliseconds) around the claim, for the M1/N1 race scenarios. */
export interface TestHooks {
  beforeClaimMs?: number;
  afterClaimMs?: number;
}

export interface CreateRequest {
  op: "workspace.create";
  workspaceId: string;
  owner: string;
  source: SourceSpec;
  /** Lexically normalised relativeCwd ("" = root). */
  relativeCwd: string;
  purpose: string | null;
  /** Recorded for merge-to-base (directory sources whose base is a local branch). */
  integration: IntegrationTarget | null;
  hooks: TestHooks;
}

/** Agent → runtime during create: send the objects of `commit` not reachable from `haves`. */
export interface NeedObjectsMessage {
  type: "need-objects";
  haves: string[];
}

/** Runtime → agent: the runtime failed part-way; roll back. */
export interface AbortMessage {
  type: "abort";
  message: string;
}

/** Agent → runtime progress marks (create). */
export interface ProgressMessage {
  type: "progress";
  phase: "negotiate" | "checkout";
}

export interface WorkspaceView {
  lifecycle: "ready" | "paused";
  /** Canonical remote path of the workspace root. */
  cwd: string;
  lifecycleEnvironment: Record<string, string>;
}

export interface CreateResult {
  view: WorkspaceView;
  materializedFreshContent: boolean;
}

export type InspectResult =
  { status: "missing" } | { status: "error"; message: string } | ({ status: "ready" | "paused" } & { view: WorkspaceView });

/** What merge-to-base needs to know about a ready workspace. */
export interface MergeInfo {
  /** Commit the workspace's checkout is at now. */
  head: string;
  /** Commit the workspace was materialized from (the Paseo host has it). */
  createdFrom: string;
  integration: IntegrationTarget;
}

export interface ReconcileResult {
  removed: Array<{ workspaceId: string; dir: string }>;
}
