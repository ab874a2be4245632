// Helpers every agent workspace op shares: request checks, the public view of a manifest,
// completeness, and removal of an owned workspace (processes, cache pin, directory).
import { existsSync } from "node:fs";
import { RuntimeError } from "../../shared/errors.js";
import type { AgentContext } from "../context.js";
import { WorkspaceTarget, type WorkspaceView } from "../../shared/agent-api.js";
import { parse, type Guard } from "../../shared/guards.js";
import type { WorkspaceLayout } from "../layout.js";
import type { WorkspaceManifest } from "./manifest.js";
import { loadWorkspace } from "./store.js";
import { removeWorkspaceDir } from "./claim.js";
import { unpinCommit } from "./git-cache.js";
import { killWorkspaceProcesses } from "../proc/process-set.js";
import { keepUnmirroredWork } from "./work-archive.js";
import type { ArchivedWork } from "../../shared/agent-api.js";

/** `value` checked against a request schema; a failure is an input error with the schema's line. */
export function parseRequest<T>(schema: Guard<T>, value: unknown): T {
  return parse(schema, value, (why) => new RuntimeError("input", why ?? "malformed agent request"));
}

export function target(ctx: AgentContext): WorkspaceTarget {
  const { workspaceId, owner } = parseRequest(WorkspaceTarget, ctx.request);
  return { workspaceId, owner };
}

export function lifecycleEnvironment(branch: string): Record<string, string> {
  return { PASEO_SOURCE_CHECKOUT_PATH: ".", PASEO_ROOT_PATH: ".", PASEO_WORKTREE_PATH: ".", PASEO_BRANCH_NAME: branch };
}

export function view(m: WorkspaceManifest): WorkspaceView {
  return { lifecycle: m.phase === "paused" ? "paused" : "ready", cwd: m.workspaceRoot, lifecycleEnvironment: m.lifecycleEnvironment };
}

export function incomplete(workspaceId: string): RuntimeError {
  return new RuntimeError("remote", `SSH workspace is incomplete: ${workspaceId}`);
}

/** A complete manifest whose checkout is gone out-of-band is as broken as an interrupted create. */
export function isComplete(m: WorkspaceManifest): boolean {
  return m.phase !== "materializing" && m.workspaceRoot !== "" && existsSync(m.workspaceRoot);
}

export function loadComplete(ctx: AgentContext): { layout: WorkspaceLayout; manifest: WorkspaceManifest } | null {
  const { workspaceId, owner } = target(ctx);
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  if (loaded.state === "missing") return null;
  if (!isComplete(loaded.manifest)) throw incomplete(workspaceId);
  return loaded;
}

/**
 * Kills the workspace's processes, keeps its work unless `mirrored` proves it was brought back
 * (work-archive.ts), drops its cache pin and removes its directory; where the work was kept, if anywhere.
 */
export async function removeOwned(
  root: string,
  layout: WorkspaceLayout,
  manifest: WorkspaceManifest,
  mirrored?: string | null,
): Promise<ArchivedWork | null> {
  await killWorkspaceProcesses(layout);
  const archived = await keepUnmirroredWork(root, layout, manifest, mirrored);
  await unpinCommit(root, manifest.projectKey, layout.key);
  await removeWorkspaceDir(root, layout);
  return archived;
}
