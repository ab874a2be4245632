// Agent side of the workspace lifecycle, registered as `workspace.*` ops: create
// (create-on-host.ts), inspect, pause, resume, destroy, reconcile (reconcile-on-host.ts),
// release-backing, merge-to-base (merge-info + export-objects) and adopt. Every op loads the
// manifest through loadWorkspace() first, so ownership is verified before anything is read or
// changed, and removal only ever touches a directory whose manifest names this owner.
import { RuntimeError } from "../../shared/errors.js";
import type { AgentContext, OneShotHandlers } from "../context.js";
import {
  AdoptRequest,
  ExportObjectsRequest,
  RemoveRequest,
  WorkStateRequest,
  type InspectResult,
  type MergeInfo,
  type RemoveResult,
  type WorkStateAnswer,
  type WorkspaceView,
} from "../../shared/agent-api.js";
import { checkoutHead, streamPack } from "./export.js";
import { loadWorkspace, replaceManifest } from "./store.js";
import { freezeWorkspaceProcesses, thawWorkspaceProcesses } from "../proc/process-set.js";
import { portWatch } from "../exec/port-watch.js";
import { incomplete, isComplete, loadComplete, parseRequest, removeOwned, target, view } from "./workspace-op-helpers.js";
import { create } from "./create-on-host.js";
import { reconcile } from "./reconcile-on-host.js";
import { readWorkState } from "./work-state.js";

async function inspect(ctx: AgentContext): Promise<InspectResult> {
  const { workspaceId, owner } = target(ctx);
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  if (loaded.state === "missing") return { status: "missing" };
  if (!isComplete(loaded.manifest)) return { status: "error", message: incomplete(workspaceId).message };
  return { status: loaded.manifest.phase === "paused" ? "paused" : "ready", view: view(loaded.manifest) };
}

async function pause(ctx: AgentContext): Promise<null> {
  const w = loadComplete(ctx);
  if (!w) return null; // documented: pausing a missing workspace is a no-op
  // Paused first, so no new exec starts while the sweep runs.
  if (w.manifest.phase !== "paused") replaceManifest(w.layout, { ...w.manifest, phase: "paused" });
  // Its forwards end first: nothing should reach a server that is about to stop.
  portWatch.setPaused(w.manifest.workspaceId, true);
  await freezeWorkspaceProcesses(w.layout);
  return null;
}

async function resume(ctx: AgentContext): Promise<WorkspaceView> {
  const { workspaceId, owner } = target(ctx);
  const w = loadComplete(ctx);
  if (!w) throw new RuntimeError("remote", `SSH workspace is missing: ${workspaceId}`);
  await thawWorkspaceProcesses(w.layout);
  portWatch.setPaused(workspaceId, false);
  if (w.manifest.phase !== "ready") replaceManifest(w.layout, { ...w.manifest, phase: "ready" });
  const after = loadWorkspace(ctx.root, workspaceId, owner);
  if (after.state !== "present" || after.manifest.phase !== "ready")
    throw new RuntimeError("remote", `SSH workspace did not resume: ${workspaceId}`);
  return view(after.manifest);
}

async function destroy(ctx: AgentContext): Promise<RemoveResult> {
  const { workspaceId, owner, mirrored } = parseRequest(RemoveRequest, ctx.request);
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  if (loaded.state !== "present") return { archived: null };
  return { archived: await removeOwned(ctx.root, loaded.layout, loaded.manifest, mirrored) };
}

async function releaseBacking(ctx: AgentContext): Promise<RemoveResult> {
  const { workspaceId, owner, mirrored } = parseRequest(RemoveRequest, ctx.request);
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  if (loaded.state === "missing") return { archived: null };
  if (loaded.manifest.phase === "ready" && isComplete(loaded.manifest)) {
    throw new RuntimeError("input", `SSH workspace is ready; pause it before releasing its backing: ${workspaceId}`);
  }
  return { archived: await removeOwned(ctx.root, loaded.layout, loaded.manifest, mirrored) };
}

/** The workspace's work (null when it is missing or incomplete: there is nothing to bring back). */
async function workState(ctx: AgentContext): Promise<WorkStateAnswer> {
  const { workspaceId, owner, snapshot, freeze } = parseRequest(WorkStateRequest, ctx.request);
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  if (loaded.state === "missing" || !isComplete(loaded.manifest)) return { state: null };
  if (freeze) await freezeWorkspaceProcesses(loaded.layout);
  return { state: await readWorkState(loaded.layout, loaded.manifest, snapshot) };
}

/** A ready workspace that records where its work integrates, with its current HEAD. */
async function mergeInfo(ctx: AgentContext): Promise<MergeInfo> {
  const { workspaceId } = target(ctx);
  const w = loadComplete(ctx);
  if (!w) throw new RuntimeError("remote", `SSH workspace is missing: ${workspaceId}`);
  if (w.manifest.phase !== "ready") throw new RuntimeError("remote", `SSH workspace is ${w.manifest.phase}: ${workspaceId}`);
  const integration = w.manifest.integration;
  if (!integration) {
    throw new RuntimeError("input", `merge-to-base needs a workspace created from a directory source on a local branch: ${workspaceId}`);
  }
  return { head: await checkoutHead(w.layout.checkout), createdFrom: w.manifest.commit, integration };
}

/** Streams the objects of the workspace's HEAD that `haves` do not reach (Stdout frames + Eof). */
async function exportObjects(ctx: AgentContext): Promise<{ head: string; bytes: number }> {
  const { workspaceId } = target(ctx);
  const w = loadComplete(ctx);
  if (!w) throw new RuntimeError("remote", `SSH workspace is missing: ${workspaceId}`);
  // Commits it cannot read only make the pack larger: they are left out rather than refused.
  const raw = ctx.request.haves;
  const offered = Array.isArray(raw) ? raw.filter((h): h is string => typeof h === "string") : [];
  const { haves, wants } = parseRequest(ExportObjectsRequest, { ...ctx.request, haves: offered });
  return streamPack(ctx, w.layout.checkout, haves, wants);
}

/**
 * Moves a workspace from a previous runtime instance (an old Paseo home) to the requesting one:
 * the manifest must be valid and name `from` as its owner. Idempotent once adopted.
 */
async function adopt(ctx: AgentContext): Promise<null> {
  const { workspaceId, owner, from } = parseRequest(AdoptRequest, ctx.request);
  let loaded: ReturnType<typeof loadWorkspace>;
  try {
    loaded = loadWorkspace(ctx.root, workspaceId, from);
  } catch (err) {
    // Already ours (a repeated adopt) is success; anything else keeps its ownership verdict.
    if (loadWorkspace(ctx.root, workspaceId, owner).state === "present") return null;
    throw err;
  }
  if (loaded.state === "missing") throw new RuntimeError("remote", `SSH workspace is missing: ${workspaceId}`);
  replaceManifest(loaded.layout, { ...loaded.manifest, owner });
  return null;
}

export const workspaceOps = {
  "workspace.create": create,
  "workspace.inspect": inspect,
  "workspace.pause": pause,
  "workspace.resume": resume,
  "workspace.destroy": destroy,
  "workspace.reconcile": reconcile,
  "workspace.release-backing": releaseBacking,
  "workspace.merge-info": mergeInfo,
  "workspace.adopt": adopt,
  "workspace.export-objects": exportObjects,
  "workspace.work-state": workState,
} satisfies Partial<OneShotHandlers>;
