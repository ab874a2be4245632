// Agent side of the workspace lifecycle: create (claim, receive or fetch objects, check out),
// inspect, pause, resume, destroy, reconcile, release-backing, merge-to-base. Every op loads the
// manifest through loadWorkspace() first, so ownership is verified before anything is read or
// changed, and removal only ever touches a directory whose manifest names this owner.
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { basename, join } from "node:path";
import { randomBytes } from "node:crypto";
import { RuntimeError } from "../errors.js";
import type { AgentContext, OpSpec } from "./context.js";
import type { CreateRequest, CreateResult, InspectResult, MergeInfo, ReconcileResult, SourceSpec, WorkspaceView } from "../workspace/agent-protocol.js";
import { checkoutHead, streamPack } from "./workspace-export.js";
import { normaliseRelativePath } from "../workspace/relative-path.js";
import { SHA_RE } from "../workspace/git-exec.js";
import { WORKSPACE_PREFIX, hashName, rootLayout, workspaceLayout, type WorkspaceLayout } from "./layout.js";
import type { IntegrationTarget, WorkspaceManifest } from "./manifest.js";
import { loadWorkspace, parseManifest, replaceManifest } from "./workspace-store.js";
import { acquireCreateLock, claimWorkspace, createInProgress, newManifest, removeWorkspaceDir, verifyOwned } from "./workspace-claim.js";
import { cacheTips, ensureCache, fetchGitSource, hasCommit, olderThan, pinCommit, receivePack, unpinCommit, cachePath } from "./git-cache.js";
import { materializeCheckout, resolveWorkspaceRoot } from "./workspace-checkout.js";
import { FrameInbox } from "./frame-inbox.js";
import { freezeWorkspaceProcesses, killWorkspaceProcesses, thawWorkspaceProcesses } from "./process-set.js";

const HEX_KEY = /^[0-9a-f]{16,64}$/;
const STAGING_PREFIX = "checkout-";
/** A staging checkout this old belongs to an agent that died (a live clone never takes hours). */
const STAGING_MAX_AGE_MS = 6 * 3600_000;
/** Caches younger than this are never pruned: a create may be filling one right now. */
const CACHE_PRUNE_MIN_AGE_MS = 10 * 60_000;

function str(req: Record<string, unknown>, name: string, nonEmpty = true): string {
  const v = req[name];
  if (typeof v !== "string" || (nonEmpty && v === "")) throw new RuntimeError("input", `agent request field ${name} must be a${nonEmpty ? " non-empty" : ""} string`);
  return v;
}

function target(ctx: AgentContext): { workspaceId: string; owner: string } {
  return { workspaceId: str(ctx.request, "workspaceId", false), owner: str(ctx.request, "owner") };
}

export function lifecycleEnvironment(branch: string): Record<string, string> {
  return { PASEO_SOURCE_CHECKOUT_PATH: ".", PASEO_ROOT_PATH: ".", PASEO_WORKTREE_PATH: ".", PASEO_BRANCH_NAME: branch };
}

function view(m: WorkspaceManifest): WorkspaceView {
  return { lifecycle: m.phase === "paused" ? "paused" : "ready", cwd: m.workspaceRoot, lifecycleEnvironment: m.lifecycleEnvironment };
}

function incomplete(workspaceId: string): RuntimeError {
  return new RuntimeError("remote", `SSH workspace is incomplete: ${workspaceId}`);
}

/** A complete manifest whose checkout is gone out-of-band is as broken as an interrupted create. */
function isComplete(m: WorkspaceManifest): boolean {
  return m.phase !== "materializing" && m.workspaceRoot !== "" && existsSync(m.workspaceRoot);
}

function parseSource(v: unknown): SourceSpec {
  const s = (v ?? {}) as Record<string, unknown>;
  const subdirectory = normaliseRelativePath(typeof s.subdirectory === "string" ? s.subdirectory : "");
  if (s.kind === "directory") {
    const projectKey = str(s, "projectKey");
    const commit = str(s, "commit");
    if (!HEX_KEY.test(projectKey) || !SHA_RE.test(commit)) throw new RuntimeError("input", "malformed directory source in agent request");
    return { kind: "directory", projectKey, commit, branch: str(s, "branch", false), subdirectory };
  }
  if (s.kind === "git") return { kind: "git", url: str(s, "url"), revision: str(s, "revision", false), newBranch: str(s, "newBranch", false), subdirectory };
  throw new RuntimeError("input", "agent request has an unknown source kind");
}

function checkBranch(source: SourceSpec): SourceSpec {
  const branch = source.kind === "directory" ? source.branch : source.newBranch;
  if (branch.startsWith("-") || /[\s\0]/.test(branch)) throw new RuntimeError("input", `Invalid branch name: ${branch}`);
  return source;
}

function parseIntegration(v: unknown): IntegrationTarget | null {
  if (v === null || v === undefined) return null;
  const i = v as Record<string, unknown>;
  const localPath = str(i, "localPath");
  const baseBranch = str(i, "baseBranch");
  if (!localPath.startsWith("/") || baseBranch.startsWith("-")) throw new RuntimeError("input", "malformed integration target in agent request");
  return { localPath, baseBranch };
}

function sourceKey(source: SourceSpec): string {
  // Git caches are keyed by URL (hash only: the URL itself never becomes a path).
  return source.kind === "directory" ? source.projectKey : hashKey(`git\0${source.url}`);
}

function hashKey(value: string): string {
  return hashName(value, 32);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function hookMs(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.min(v, 60_000) : 0;
}

/** Brings objects for `source` into its cache and returns the commit/branch to check out. */
async function fillCache(ctx: AgentContext, inbox: FrameInbox, cache: string, source: SourceSpec): Promise<{ commit: string; branch: string }> {
  if (source.kind === "git") {
    const resolved = await fetchGitSource(cache, source.url, source.revision);
    return source.newBranch ? { commit: resolved.commit, branch: source.newBranch } : resolved;
  }
  if (!(await hasCommit(cache, source.commit))) {
    ctx.sendJson({ type: "need-objects", haves: await cacheTips(cache) });
    await receivePack(cache, inbox);
    if (!(await hasCommit(cache, source.commit))) throw new RuntimeError("remote", `objects for commit ${source.commit} did not arrive`);
  }
  return { commit: source.commit, branch: source.branch };
}

async function create(ctx: AgentContext): Promise<CreateResult> {
  const { workspaceId, owner } = target(ctx);
  const req = ctx.request as unknown as CreateRequest;
  const source = checkBranch(parseSource(req.source));
  const relativeCwd = normaliseRelativePath(typeof req.relativeCwd === "string" ? req.relativeCwd : "");
  const hooks = (req.hooks ?? {}) as Record<string, unknown>;
  const integration = source.kind === "directory" ? parseIntegration(req.integration) : null;
  const purpose = typeof req.purpose === "string" ? req.purpose : null;
  const inbox = new FrameInbox(ctx);
  const projectKey = sourceKey(source);

  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  const layout = loaded.layout;
  let release: () => void;
  if (loaded.state === "present") {
    if (isComplete(loaded.manifest)) return { view: view(loaded.manifest), materializedFreshContent: false };
    // An owned leftover of an interrupted create (unless another agent is still on it): start over.
    release = acquireCreateLock(layout, workspaceId);
    await killWorkspaceProcesses(layout);
    rmSync(layout.checkout, { recursive: true, force: true });
    replaceManifest(layout, { ...newManifest(workspaceId, owner, projectKey), createdAt: loaded.manifest.createdAt });
  } else {
    await sleep(hookMs(hooks.beforeClaimMs));
    claimWorkspace(ctx.root, layout, newManifest(workspaceId, owner, projectKey));
    release = acquireCreateLock(layout, workspaceId);
  }

  try {
    await sleep(hookMs(hooks.afterClaimMs));
    inbox.assertAttended();
    verifyOwned(ctx.root, workspaceId, owner);
    const cache = await ensureCache(ctx.root, projectKey);
    ctx.sendJson({ type: "progress", phase: "negotiate" });
    const { commit, branch } = await fillCache(ctx, inbox, cache, source);
    inbox.assertAttended();
    verifyOwned(ctx.root, workspaceId, owner);
    await pinCommit(cache, layout.key, commit);
    ctx.sendJson({ type: "progress", phase: "checkout" });
    const staging = join(rootLayout(ctx.root).tmpBase, `${STAGING_PREFIX}${layout.key}-${randomBytes(4).toString("hex")}`);
    await materializeCheckout(staging, layout.checkout, cache, commit, branch, () => verifyOwned(ctx.root, workspaceId, owner));
    const workspaceRoot = resolveWorkspaceRoot(layout.checkout, source.subdirectory, relativeCwd);
    const current = verifyOwned(ctx.root, workspaceId, owner);
    const done = replaceManifest(layout, { ...current, phase: "ready", commit, branch, workspaceRoot, lifecycleEnvironment: lifecycleEnvironment(branch), integration, purpose });
    release();
    return { view: view(done), materializedFreshContent: true };
  } catch (err) {
    await rollback(ctx.root, layout, workspaceId, owner, projectKey, err);
    if (existsSync(layout.dir)) release();
    throw err;
  }
}

/** Removes what a failed create made, but only while the directory is still provably ours. */
async function rollback(root: string, layout: WorkspaceLayout, workspaceId: string, owner: string, projectKey: string, cause: unknown): Promise<void> {
  if (cause instanceof RuntimeError && cause.errorClass === "ownership") return;
  let still: ReturnType<typeof loadWorkspace>;
  try {
    still = loadWorkspace(root, workspaceId, owner);
  } catch {
    return; // someone else's now: never touch it
  }
  if (still.state === "missing") return;
  try {
    await unpinCommit(root, projectKey, layout.key);
    removeWorkspaceDir(root, layout);
  } catch (err) {
    const first = cause instanceof Error ? cause.message : String(cause);
    const second = err instanceof Error ? err.message : String(err);
    throw new RuntimeError("remote", `SSH creation rollback failed: ${first}; ${second}`, { cause });
  }
}

async function inspect(ctx: AgentContext): Promise<InspectResult> {
  const { workspaceId, owner } = target(ctx);
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  if (loaded.state === "missing") return { status: "missing" };
  if (!isComplete(loaded.manifest)) return { status: "error", message: `SSH workspace is incomplete: ${workspaceId}` };
  return { status: loaded.manifest.phase === "paused" ? "paused" : "ready", view: view(loaded.manifest) };
}

function loadComplete(ctx: AgentContext): { layout: WorkspaceLayout; manifest: WorkspaceManifest } | null {
  const { workspaceId, owner } = target(ctx);
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  if (loaded.state === "missing") return null;
  if (!isComplete(loaded.manifest)) throw incomplete(workspaceId);
  return loaded;
}

async function pause(ctx: AgentContext): Promise<null> {
  const w = loadComplete(ctx);
  if (!w) return null; // documented: pausing a missing workspace is a no-op
  // Paused first, so no new exec starts while the sweep runs.
  if (w.manifest.phase !== "paused") replaceManifest(w.layout, { ...w.manifest, phase: "paused" });
  await freezeWorkspaceProcesses(w.layout);
  return null;
}

async function resume(ctx: AgentContext): Promise<WorkspaceView> {
  const { workspaceId, owner } = target(ctx);
  const w = loadComplete(ctx);
  if (!w) throw new RuntimeError("remote", `SSH workspace is missing: ${workspaceId}`);
  await thawWorkspaceProcesses(w.layout);
  if (w.manifest.phase !== "ready") replaceManifest(w.layout, { ...w.manifest, phase: "ready" });
  const after = loadWorkspace(ctx.root, workspaceId, owner);
  if (after.state !== "present" || after.manifest.phase !== "ready") throw new RuntimeError("remote", `SSH workspace did not resume: ${workspaceId}`);
  return view(after.manifest);
}

/** Kills the workspace's processes, drops its cache pin and removes its directory. */
async function removeOwned(root: string, layout: WorkspaceLayout, manifest: WorkspaceManifest): Promise<void> {
  await killWorkspaceProcesses(layout);
  await unpinCommit(root, manifest.projectKey, layout.key);
  removeWorkspaceDir(root, layout);
}

async function destroy(ctx: AgentContext): Promise<null> {
  const { workspaceId, owner } = target(ctx);
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  if (loaded.state === "present") await removeOwned(ctx.root, loaded.layout, loaded.manifest);
  return null;
}

async function releaseBacking(ctx: AgentContext): Promise<null> {
  const { workspaceId, owner } = target(ctx);
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  if (loaded.state === "missing") return null;
  if (loaded.manifest.phase === "ready" && isComplete(loaded.manifest)) {
    throw new RuntimeError("input", `SSH workspace is ready; pause it before releasing its backing: ${workspaceId}`);
  }
  await removeOwned(ctx.root, loaded.layout, loaded.manifest);
  return null;
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
  const offered = Array.isArray(ctx.request.haves) ? ctx.request.haves.filter((h): h is string => typeof h === "string") : [];
  return streamPack(ctx, w.layout.checkout, offered);
}

/**
 * Moves a workspace from a previous runtime instance (an old Paseo home) to the requesting one:
 * the manifest must be valid and name `from` as its owner. Idempotent once adopted.
 */
async function adopt(ctx: AgentContext): Promise<null> {
  const { workspaceId, owner } = target(ctx);
  const from = str(ctx.request, "from");
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

function readOwnManifest(dir: string): WorkspaceManifest | null {
  try {
    const text = readFileSync(join(dir, "manifest.json"), "utf8");
    const id = (JSON.parse(text) as { workspaceId?: unknown }).workspaceId;
    return typeof id === "string" ? parseManifest(text, id, basename(dir)) : null;
  } catch {
    return null;
  }
}

/**
 * Removes orphans: directories whose name is the derived name of their manifest's id, owned by
 * this runtime instance, with an id Paseo no longer knows. Everything else is left alone. Then
 * prunes caches no workspace references and stale trash.
 */
async function reconcile(ctx: AgentContext): Promise<ReconcileResult> {
  const owner = str(ctx.request, "owner");
  const keepRaw = ctx.request.workspaceIds;
  if (!Array.isArray(keepRaw) || !keepRaw.every((x) => typeof x === "string")) throw new RuntimeError("input", "reconcile requires workspaceIds");
  const keep = new Set(keepRaw as string[]);
  const l = rootLayout(ctx.root);
  const removed: ReconcileResult["removed"] = [];
  const usedKeys = new Set<string>();
  const entries = existsSync(l.workspacesBase) ? readdirSync(l.workspacesBase) : [];
  for (const name of entries.filter((n) => n.startsWith(WORKSPACE_PREFIX))) {
    const m = readOwnManifest(join(l.workspacesBase, name));
    if (!m) continue;
    if (m.owner !== owner || keep.has(m.workspaceId)) {
      if (m.projectKey) usedKeys.add(m.projectKey);
      continue;
    }
    const layout = workspaceLayout(ctx.root, m.workspaceId);
    // Re-verify through the store right before removal (ownership may have changed meanwhile).
    const loaded = loadWorkspace(ctx.root, m.workspaceId, owner);
    // A create running right now is not an orphan yet: Paseo persists the record after create.
    if (loaded.state !== "present" || createInProgress(layout)) continue;
    await removeOwned(ctx.root, layout, loaded.manifest);
    removed.push({ workspaceId: m.workspaceId, dir: layout.dir });
  }
  pruneCaches(ctx.root, usedKeys);
  pruneTrash(ctx.root);
  return { removed };
}

function pruneCaches(root: string, used: Set<string>): void {
  const base = rootLayout(root).cacheBase;
  if (!existsSync(base)) return;
  for (const name of readdirSync(base)) {
    const key = name.replace(/\.git$/, "");
    if (!name.endsWith(".git") || used.has(key) || !olderThan(cachePath(root, key), CACHE_PRUNE_MIN_AGE_MS)) continue;
    rmSync(cachePath(root, key), { recursive: true, force: true });
  }
}

/** Removes leftovers of killed agents: half-deleted workspaces and abandoned staging checkouts. */
function pruneTrash(root: string): void {
  const base = rootLayout(root).tmpBase;
  if (!existsSync(base)) return;
  for (const name of readdirSync(base)) {
    const stale = (name.startsWith("trash-") && olderThan(join(base, name), 60_000)) || (name.startsWith(STAGING_PREFIX) && olderThan(join(base, name), STAGING_MAX_AGE_MS));
    if (stale) rmSync(join(base, name), { recursive: true, force: true });
  }
}

export const workspaceOps: Record<string, OpSpec> = {
  "workspace.create": { handler: create },
  "workspace.inspect": { handler: inspect },
  "workspace.pause": { handler: pause },
  "workspace.resume": { handler: resume },
  "workspace.destroy": { handler: destroy },
  "workspace.reconcile": { handler: reconcile },
  "workspace.release-backing": { handler: releaseBacking },
  "workspace.merge-info": { handler: mergeInfo },
  "workspace.adopt": { handler: adopt },
  "workspace.export-objects": { handler: exportObjects },
};
