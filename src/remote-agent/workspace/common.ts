// Helpers every agent workspace op shares: request field checks, the public view of a manifest,
// completeness, and removal of an owned workspace (processes, cache pin, directory).
import { existsSync } from "node:fs";
import { RuntimeError } from "../../shared/errors.js";
import type { AgentContext } from "../context.js";
import type { WorkspaceView } from "../../shared/agent-api.js";
import type { WorkspaceLayout } from "../layout.js";
import type { WorkspaceManifest } from "./manifest.js";
import { loadWorkspace } from "./store.js";
import { removeWorkspaceDir } from "./claim.js";
import { unpinCommit } from "./git-cache.js";
import { killWorkspaceProcesses } from "../proc/process-set.js";

export function str(req: Record<string, unknown>, name: string, nonEmpty = true): string {
  const v = req[name];
  if (typeof v !== "string" || (nonEmpty && v === ""))
    throw new RuntimeError("input", `agent request field ${name} must be a${nonEmpty ? " non-empty" : ""} string`);
  return v;
}

export function target(ctx: AgentContext): { workspaceId: string; owner: string } {
  return { workspaceId: str(ctx.request, "workspaceId", false), owner: str(ctx.request, "owner") };
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

/** Kills the workspace's processes, drops its cache pin and removes its directory. */
export async function removeOwned(root: string, layout: WorkspaceLayout, manifest: WorkspaceManifest): Promise<void> {
  await killWorkspaceProcesses(layout);
  await unpinCommit(root, manifest.projectKey, layout.key);
  await removeWorkspaceDir(root, layout);
}
