// Agent side of `create`: claim the directory (or take over an owned leftover), bring the commit's
// objects into the project cache (received from the runtime, or fetched for git sources), build
// the checkout, canonicalise the workspace root, and mark the manifest ready. A failure part-way
// removes what this create made, and only while the directory is still provably ours.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { RuntimeError } from "../../shared/errors.js";
import type { AgentContext, ReceivedRequest } from "../context.js";
import { CreateRequest, SourceSpec, WorkspaceTarget, type CreateResult, type LfsSpec } from "../../shared/agent-api.js";
import { isRecord } from "../../shared/guards.js";
import { holdWorkspaceHook, workspaceHooks } from "../test-hooks.js";
import { normaliseRelativePath } from "../../shared/relative-path.js";
import { hashName, rootLayout, type WorkspaceLayout } from "../layout.js";
import { loadWorkspace, replaceManifest } from "./store.js";
import { acquireCreateLock, claimWorkspace, newManifest, removeWorkspaceDir, verifyOwned } from "./claim.js";
import { discardTree } from "./trash.js";
import { ensureCache, fetchGitSource, pinCommit, unpinCommit } from "./git-cache.js";
import { fillObjects, type Intake } from "./object-fill.js";
import { fillSubmodules, finishCheckout, withShallowDefaults } from "./submodule-checkout.js";
import { gitSourceAccess } from "./git-credentials.js";
import { explainNoSpace } from "./disk.js";
import { materializeCheckout, resolveWorkspaceRoot } from "./checkout.js";
import { createUnderWay } from "./spare-checkout.js";
import { FrameInbox } from "./frame-inbox.js";
import { fillLfsStore } from "./lfs-store.js";
import { hasGitLfs } from "./lfs-checkout.js";
import { holdLfsCheckout, hostCheckoutTimeoutMs, hostGitSearchPath } from "../test-hooks.js";
import { killWorkspaceProcesses } from "../proc/process-set.js";
import { enableAgentForwarding } from "./ssh-agent.js";
import { enableCredentialForwarding } from "./git-credential-relay.js";
import { isComplete, lifecycleEnvironment, parseRequest, view } from "./workspace-op-helpers.js";

/** Name prefix of checkouts being built in `<root>/tmp` (pruned by reconcile when abandoned). */
export const STAGING_PREFIX = "checkout-";

function parseSource(v: unknown): SourceSpec {
  const s = isRecord(v) ? v : {};
  // No subdirectory (or one that is not a string) is the checkout itself; an escaping one is refused first.
  const given: Record<string, unknown> = {
    ...s,
    subdirectory: normaliseRelativePath(typeof s.subdirectory === "string" ? s.subdirectory : ""),
  };
  if (s.kind === "directory") given.submodules = withShallowDefaults(s.submodules);
  return parseRequest(SourceSpec, given);
}

function checkBranch(source: SourceSpec): SourceSpec {
  const branch = source.kind === "directory" ? source.branch : source.newBranch;
  if (branch.startsWith("-") || /[\s\0]/.test(branch)) throw new RuntimeError("input", `Invalid branch name: ${branch}`);
  return source;
}

/**
 * The create request, checked in the order the agent has always used: target, source, relativeCwd,
 * integration, LFS. What it tolerates is defaulted first: no relativeCwd is the root, a purpose that
 * is not a string is none, and a git source's integration and LFS parts are ignored.
 */
function parseCreate(req: ReceivedRequest): CreateRequest {
  const { workspaceId, owner } = parseRequest(WorkspaceTarget, req);
  const source = checkBranch(parseSource(req.source));
  const relativeCwd = normaliseRelativePath(typeof req.relativeCwd === "string" ? req.relativeCwd : "");
  const directory = source.kind === "directory";
  const r = parseRequest(CreateRequest, {
    ...req,
    source,
    relativeCwd,
    purpose: typeof req.purpose === "string" ? req.purpose : null,
    integration: directory ? (req.integration ?? null) : null,
    workHome: directory ? (req.workHome ?? null) : null,
    lfs: directory ? (req.lfs ?? null) : null,
  });
  // Only these fields of the integration target reach the manifest.
  const i = r.integration;
  const integration = i && { localPath: i.localPath, baseBranch: i.baseBranch, seal: i.seal };
  const workHome = r.workHome ? { gitDir: r.workHome.gitDir, seal: r.workHome.seal } : null;
  const lfs = r.lfs ? { pointers: r.lfs.pointers, endpoint: r.lfs.endpoint, ...(r.lfs.only ? { only: true } : {}) } : null;
  return {
    workspaceId,
    owner,
    source,
    relativeCwd,
    purpose: r.purpose,
    integration,
    workHome,
    lfs,
    scope: r.scope ?? null,
    forwardAgent: r.forwardAgent === true,
    forwardGitCredentials: r.forwardGitCredentials === true,
  };
}

function sourceKey(source: SourceSpec): string {
  // Git caches are keyed by URL (hash only: the URL itself never becomes a path), without the
  // credentials in it: they do not name the repository.
  return source.kind === "directory" ? source.projectKey : hashName(`git\0${gitSourceAccess(source.url).url}`, 32);
}

/** Brings objects for `source` into its cache and returns the commit/branch to check out. */
async function fillCache(intake: Intake, cache: string, source: SourceSpec): Promise<{ commit: string; branch: string }> {
  if (source.kind === "git") {
    const resolved = await fetchGitSource(cache, source.url, source.revision);
    return source.newBranch ? { commit: resolved.commit, branch: source.newBranch } : resolved;
  }
  const tips = source.upstream?.tracking ? [source.upstream.tracking.commit] : [];
  await fillObjects(intake, cache, { commit: source.commit, shallow: source.shallow ?? [], tips });
  return { commit: source.commit, branch: source.branch };
}

export async function create(ctx: AgentContext): Promise<CreateResult> {
  // Spare checkouts written in the background wait until no create is under way.
  const ended = createUnderWay();
  try {
    return await createWorkspace(ctx);
  } finally {
    ended();
  }
}

async function createWorkspace(ctx: AgentContext): Promise<CreateResult> {
  const startedAt = Date.now();
  const {
    workspaceId,
    owner,
    source,
    relativeCwd,
    purpose,
    integration,
    workHome = null,
    lfs: lfsSpec = null,
    scope = null,
    forwardAgent,
    forwardGitCredentials,
  } = parseCreate(ctx.request);
  const hooks = workspaceHooks(ctx.root, workspaceId);
  const inbox = new FrameInbox(ctx);
  const projectKey = sourceKey(source);
  const searchPath = hostGitSearchPath(ctx.root) ?? process.env.PATH ?? "";

  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  const layout = loaded.layout;
  if (loaded.state === "present" && isComplete(loaded.manifest)) return { view: view(loaded.manifest), materializedFreshContent: false };
  let release: () => void;
  try {
    if (loaded.state === "present") {
      // An owned leftover of an interrupted create (unless another agent is still on it): start over.
      release = acquireCreateLock(layout, workspaceId);
    } else {
      await holdWorkspaceHook(ctx.root, workspaceId, "beforeClaimMs", hooks.beforeClaimMs);
      claimWorkspace(ctx.root, layout, newManifest(workspaceId, owner, projectKey, scope));
      try {
        release = acquireCreateLock(layout, workspaceId);
      } catch (err) {
        await rollback({ root: ctx.root, layout, workspaceId, owner, projectKey: null }, err);
        throw err;
      }
    }
  } catch (err) {
    throw explainNoSpace(err, ctx.root, "while claiming the workspace");
  }

  try {
    if (loaded.state === "present") {
      await killWorkspaceProcesses(layout);
      await discardTree(ctx.root, layout.checkout, `checkout-of-${layout.key}`);
      replaceManifest(layout, { ...newManifest(workspaceId, owner, projectKey, scope), createdAt: loaded.manifest.createdAt });
    }
    await holdWorkspaceHook(ctx.root, workspaceId, "afterClaimMs", hooks.afterClaimMs);
    inbox.assertAttended();
    verifyOwned(ctx.root, workspaceId, owner);
    const cache = await ensureCache(ctx.root, projectKey);
    ctx.sendJson({ type: "progress", phase: "negotiate" });
    const intake: Intake = { ctx, inbox, startedAt };
    const { commit, branch } = await fillCache(intake, cache, source);
    const submodules = source.kind === "directory" ? (source.submodules ?? []) : [];
    // The submodules' LFS objects go into the project's store too, asked for with the superproject's.
    const lfsSpecs = [lfsSpec, ...submodules.map((m) => m.lfs ?? null)].filter((s): s is LfsSpec => s !== null);
    if (lfsSpecs.length > 0)
      await fillLfsStore(
        intake,
        cache,
        lfsSpecs.flatMap((s) => s.pointers),
        hasGitLfs(searchPath),
      );
    // After the LFS objects: the runtime sends one stream at a time.
    const modules = await fillSubmodules(intake, cache, submodules, layout.key);
    inbox.assertAttended();
    verifyOwned(ctx.root, workspaceId, owner);
    await pinCommit(cache, layout.key, commit);
    ctx.sendJson({ type: "progress", phase: "checkout" });
    const staging = join(rootLayout(ctx.root).tmpBase, `${STAGING_PREFIX}${layout.key}-${randomBytes(4).toString("hex")}`);
    const owned = () => void verifyOwned(ctx.root, workspaceId, owner);
    const lfs = {
      spec: lfsSpec,
      cache,
      searchPath,
      checkoutTimeoutMs: hostCheckoutTimeoutMs(ctx.root),
      report: (paths: string[], reason: string) => ctx.sendJson({ type: "lfs-pointers", paths, reason }),
      beforeLfsCheckout: () => holdLfsCheckout(ctx.root),
    };
    const finish = (dir: string) => finishCheckout(dir, source.kind === "directory" ? (source.shallow ?? []) : [], modules, lfs);
    // A spare is a plain checkout: an LFS commit's content comes from its store each time.
    await materializeCheckout({
      staging,
      checkout: layout.checkout,
      cache,
      commit,
      branch,
      beforeRename: owned,
      spares: source.kind === "directory" && !lfsSpec,
      lfs,
      remotes:
        source.kind === "directory"
          ? { kind: "directory", remotes: source.remotes ?? [], upstream: source.upstream ?? null }
          : { kind: "git", url: gitSourceAccess(source.url).url },
      finish,
    });
    if (forwardAgent) await enableAgentForwarding(ctx.root, layout);
    if (forwardGitCredentials) await enableCredentialForwarding(layout, ctx.nodePath, join(ctx.agentDir, "agent.cjs"));
    const workspaceRoot = resolveWorkspaceRoot(layout.checkout, source.subdirectory, relativeCwd);
    const current = verifyOwned(ctx.root, workspaceId, owner);
    const done = replaceManifest(layout, {
      ...current,
      phase: "ready",
      commit,
      branch,
      workspaceRoot,
      lifecycleEnvironment: lifecycleEnvironment(branch),
      integration,
      workHome,
      purpose,
    });
    release();
    return { view: view(done), materializedFreshContent: true };
  } catch (err) {
    try {
      await rollback({ root: ctx.root, layout, workspaceId, owner, projectKey }, err);
    } finally {
      if (existsSync(layout.dir)) release();
    }
    throw explainNoSpace(err, ctx.root, "during create");
  }
}

/** The workspace a create claimed, and the project whose cache it pinned (null: nothing pinned yet). */
interface Claimed {
  root: string;
  layout: WorkspaceLayout;
  workspaceId: string;
  owner: string;
  projectKey: string | null;
}

/** Removes what a failed create made, but only while the directory is still provably ours. */
async function rollback({ root, layout, workspaceId, owner, projectKey }: Claimed, cause: unknown): Promise<void> {
  if (cause instanceof RuntimeError && cause.errorClass === "ownership") return;
  let still: ReturnType<typeof loadWorkspace>;
  try {
    still = loadWorkspace(root, workspaceId, owner);
  } catch {
    return; // someone else's now: never touch it
  }
  if (still.state === "missing") return;
  try {
    // The directory first: on a full disk its removal is what frees the space the unpin needs.
    await removeWorkspaceDir(root, layout);
    await unpinCommit(root, projectKey, layout.key);
  } catch (err) {
    const first = cause instanceof Error ? cause.message : String(cause);
    const second = err instanceof Error ? err.message : String(err);
    throw new RuntimeError("remote", `SSH creation rollback failed: ${first}; ${second}`, { cause });
  }
}
