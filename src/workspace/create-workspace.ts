// Runtime side of `create`: validates and resolves everything it can locally (before any network
// use), then holds one agent conversation that claims the directory, negotiates which objects the
// remote cache lacks, receives exactly those, and checks the workspace out.
import { createHash } from "node:crypto";
import { RuntimeError, oneLine } from "../shared/errors.js";
import type { CreateInput, PlacementIntent } from "../contract/schemas.js";
import { requestFor, type RemoteHost } from "../transport/host.js";
import { agentMessage } from "../transport/agent-channel.js";
import type { Frame } from "../shared/frames.js";
import type { CreateRequest, CreateResult, SourceSpec } from "../shared/agent-api.js";
import { normaliseRelativePath } from "../shared/relative-path.js";
import { sealIntegration, sealWorkHome } from "../mirror/seal.js";
import { resolveLocalSource } from "./local-source.js";
import { localHaves, requireRemoteSpace, requireRemoteSpaceFor, sendObjects, startPack } from "./object-transfer.js";
import { lfsPlan, namePaths, sendLfsObjects, type LfsPlan } from "./lfs-objects.js";
import { holdsBigBlob } from "./big-objects.js";
import { withTransferProgress } from "./transfer-progress.js";
import type { Progress } from "./progress.js";
import { localShallow, deepeningRevs } from "./local-shallow.js";
import { planSubmodules, type LocalSubmodule } from "./submodules.js";
import { unionRepo } from "./union-repo.js";
import { localRemotes, localUpstream } from "./local-remotes.js";

/** Whole-create bound: large first transfers over slow links need minutes, never forever. */
const CREATE_TIMEOUT_MS = 30 * 60_000;
/** Below this round trip the link is the same host or a LAN: compressing harder costs more than it saves. */
const FAST_LINK_RTT_MS = 10;

export interface PreparedCreate {
  request: CreateRequest;
  /** Local repository objects are packed from (directory sources only). */
  repo: string | null;
  /** Submodules shipped too, their objects all in one pack from the local object directories `moduleObjects`. */
  modules: LocalSubmodule[];
  moduleObjects: string[];
  /** Submodules left uninitialised (the Paseo side lacks their commit), by path. */
  missingModules: string[];
  /** The commit's LFS pointers and the local store their objects are shipped from. */
  lfs: LfsPlan | null;
  /** Whether the commit holds a big blob (big-objects.ts), found while the connection is made. */
  bigBlob: Promise<boolean>;
}

/** The submodules' transfer failing names them (their git dirs are not where the user looks). */
function submoduleFailure(paths: string[], err: unknown): RuntimeError {
  const what = paths.length === 1 ? `submodule ${paths[0]!}` : `${paths.length} submodules (${namePaths(paths)})`;
  const cause = err instanceof RuntimeError ? err : null;
  const message = err instanceof Error ? err.message : String(err);
  return new RuntimeError(cause?.errorClass ?? "input", `Cannot send the objects of ${what}: ${message}`, { cause: err });
}

/** What one need-objects message asks for: the superproject's objects, or those of the submodules listed (one pack). */
function transferTarget(prepared: PreparedCreate, modules: string[] | undefined) {
  const source = prepared.request.source;
  if (source.kind !== "directory" || !prepared.repo) throw new RuntimeError("input", "objects requested for a git source");
  if (modules === undefined) {
    // The upstream's remote-tracking commit too, so the workspace compares its branch with it.
    const tracking = source.upstream?.tracking ? [source.upstream.tracking.commit] : [];
    return { commits: [...new Set([source.commit, ...tracking])], shallow: source.shallow ?? [], paths: null };
  }
  const byKey = new Map(prepared.modules.map((m) => [m.spec.key, m.spec]));
  const specs = modules.map((key) => {
    const spec = byKey.get(key);
    if (!spec) throw new RuntimeError("remote", `the remote host asked for objects of an unknown submodule ${key}`);
    return spec;
  });
  // A submodule's remote-tracking branches go with its commit: its git dir on the host gets them too.
  const commits = specs.flatMap((m) => [m.commit, ...(m.origin?.branches ?? []).map((b) => b.commit)]);
  return { commits: [...new Set(commits)], shallow: specs.flatMap((m) => m.shallow), paths: specs.map((m) => m.path) };
}

/** Cache key of a directory project: its id plus canonical repository path, hashed. */
export function projectKey(projectId: string, topLevel: string): string {
  return createHash("sha256").update(`directory\0${projectId}\0${topLevel}`, "utf8").digest("hex").slice(0, 32);
}

/** The revision a git-source placement asks for, and a branch it asks to create. */
function gitPlacement(revision: string, placement: PlacementIntent): { revision: string; newBranch: string } {
  switch (placement.kind) {
    case "existing":
      return { revision, newBranch: "" };
    case "branch":
      return { revision: placement.baseRef, newBranch: placement.branchName };
    case "checkout":
      return { revision: placement.ref, newBranch: "" };
    case "resolved-worktree": {
      const s = placement.source;
      if (s.kind === "branch-off") return { revision: s.baseBranch, newBranch: s.branchName };
      if (s.kind === "checkout-branch") return { revision: s.branchName, newBranch: "" };
      return { revision: s.headRef, newBranch: s.localBranchName ?? "" };
    }
  }
}

export async function prepareCreate(input: CreateInput, owner: string): Promise<PreparedCreate> {
  // Escapes are refused before anything exists remotely.
  const relativeCwd = normaliseRelativePath(input.placement.relativeCwd);
  const src = input.project.source;
  let source: SourceSpec;
  let repo: string | null = null;
  let integration: CreateRequest["integration"] = null;
  let workHome: CreateRequest["workHome"] = null;
  let modules: LocalSubmodule[] = [];
  let moduleObjects: string[] = [];
  let missingModules: string[] = [];
  let lfs: LfsPlan | null = null;
  if (src.kind === "directory") {
    const local = await resolveLocalSource(src.path, input.placement);
    repo = local.topLevel;
    lfs = await lfsPlan(local.topLevel, local.commit);
    workHome = sealWorkHome(local.gitDir, { owner, workspaceId: input.workspaceId, commit: local.commit });
    if (local.baseBranch) {
      integration = sealIntegration(local.topLevel, local.baseBranch, { owner, workspaceId: input.workspaceId, commit: local.commit });
    }
    const key = projectKey(input.project.projectId, local.topLevel);
    const [shallow, plan, remotes] = await Promise.all([
      localShallow(local.topLevel),
      planSubmodules(local.topLevel, local.commit, key),
      localRemotes(local.topLevel),
    ]);
    ({ modules, missing: missingModules, objectDirs: moduleObjects } = plan);
    const upstream = await localUpstream(local.topLevel, local.trackFrom, remotes);
    source = {
      kind: "directory",
      projectKey: key,
      commit: local.commit,
      branch: local.branch,
      subdirectory: local.prefix,
      ...(shallow.length > 0 ? { shallow } : {}),
      ...(modules.length > 0 ? { submodules: modules.map((m) => m.spec) } : {}),
      remotes,
      ...(upstream ? { upstream } : {}),
    };
  } else {
    const subdirectory = normaliseRelativePath(src.subdirectory);
    const { revision, newBranch } = gitPlacement(src.revision, input.placement);
    source = { kind: "git", url: src.url, revision, newBranch, subdirectory };
  }
  return {
    request: {
      workspaceId: input.workspaceId,
      owner,
      source,
      relativeCwd,
      purpose: input.purpose ?? null,
      integration,
      workHome,
      ...(lfs ? { lfs: lfs.spec } : {}),
    },
    repo,
    modules,
    moduleObjects,
    missingModules,
    lfs,
    // Never rejects: without the answer the pack is compressed as for any commit.
    bigBlob: repo && source.kind === "directory" ? holdsBigBlob(repo, source.commit).catch(() => false) : Promise.resolve(false),
  };
}

/**
 * `forward`: the host's runtime options that reach git in the workspace (forwardAgent: the
 * forwarded ssh-agent; forwardGitCredentials: the Paseo side's credential helpers).
 */
export async function runCreate(
  host: RemoteHost,
  prepared: PreparedCreate,
  progress: Progress,
  forward: { forwardAgent?: boolean; forwardGitCredentials?: boolean } = {},
): Promise<CreateResult> {
  for (const path of prepared.missingModules) progress.mark("submodule-not-initialised", { path });
  const channel = await host.openAgent();
  progress.mark("connect");
  let transfer: Promise<void> | null = null;
  let reported = false;
  const noObjects = () => {
    if (!reported) progress.mark("objects-sent", { bytes: 0 });
    reported = true;
  };
  let transferError: unknown = null;
  // Set once the agent has answered: our stream then stops, and its failure is no news.
  const stop = new AbortController();
  const failed = (err: unknown) => {
    // A stream cut because the agent stopped or went away is its consequence, not the cause.
    if (stop.signal.aborted || channel.closed) return;
    transferError = err;
    channel.sendJson({ type: "abort", message: oneLine(err instanceof Error ? err.message : String(err)) });
  };
  let lfsTransfer: Promise<void> | null = null;
  const onFrame = (f: Frame) => {
    const msg = agentMessage(f);
    if (msg?.type === "lfs-pointers")
      progress.mark("lfs-pointers", { files: msg.paths.length, paths: namePaths(msg.paths), reason: msg.reason });
    if (msg?.type === "need-lfs" && !lfsTransfer) {
      // The superproject's objects and its submodules', asked for in one message.
      const plans = [prepared.lfs, ...prepared.modules.map((m) => m.lfs)].filter((p): p is LfsPlan => p !== null);
      // Starts after the pack's stream (the agent asks once its objects are in): one stream at a time.
      lfsTransfer = (async () => {
        await transfer;
        const sent = await sendLfsObjects(channel, plans, msg.oids, stop.signal);
        progress.mark("lfs-sent", sent);
      })().catch(failed);
    }
    if (msg?.type === "progress") {
      // Checkout starts only after all objects are in place: the superproject needed none if it
      // reported none (a submodule's transfer alone does not count).
      if (msg.phase === "checkout" && !reported) noObjects();
      progress.mark(msg.phase);
    }
    if (msg?.type !== "need-objects" || !prepared.repo || prepared.request.source.kind !== "directory") return;
    // The request's round trip minus the agent's own time on it: the link's round trip.
    const rttMs = msg.agentMs === undefined ? Infinity : performance.now() - requestedAt - msg.agentMs;
    // The superproject's objects, then all the submodules' at once: one stream after the other.
    const previous = transfer;
    let paths: string[] | null = null;
    transfer = (async () => {
      await previous;
      if (transferError) return;
      const target = transferTarget(prepared, msg.modules);
      paths = target.paths;
      const { commits, shallow } = target;
      // The submodules' objects are read from all their local repositories as one (union-repo.ts).
      const union = paths === null ? null : unionRepo(prepared.moduleObjects, shallow);
      try {
        const repo = union?.path ?? prepared.repo!;
        const haves = await localHaves(repo, msg.haves);
        const cut = msg.shallow ?? [];
        const deepen = shallow.length + cut.length > 0 ? { revs: await deepeningRevs(repo, commits, cut, shallow) } : null;
        // The big-blob probe looked at the superproject's commit; the submodules' pack is compressed as usual.
        const stored = paths === null && (await prepared.bigBlob);
        const pack = withTransferProgress(
          startPack(repo, commits, haves, { fastLink: rttMs < FAST_LINK_RTT_MS, shallow: deepen, stored }),
          progress,
        );
        try {
          if (msg.disk && union) requireRemoteSpaceFor(union.storedBytes, paths!, msg.disk);
          else if (msg.disk) await requireRemoteSpace(repo, commits[0]!, haves, msg.disk);
        } catch (err) {
          pack.kill();
          throw err;
        }
        const bytes = await sendObjects(channel, pack, stop.signal);
        if (paths !== null) return progress.mark("submodule-objects-sent", { submodules: paths.length, paths: namePaths(paths), bytes });
        reported = true;
        progress.mark("objects-sent", { bytes });
      } finally {
        union?.remove();
      }
    })().catch((err: unknown) => failed(paths === null ? err : submoduleFailure(paths, err)));
  };
  channel.on("frame", onFrame);
  const requestedAt = performance.now();
  try {
    const request = {
      ...prepared.request,
      ...(forward.forwardAgent ? { forwardAgent: true } : {}),
      ...(forward.forwardGitCredentials ? { forwardGitCredentials: true } : {}),
    };
    const result = await channel.request(requestFor(host, "workspace.create", request), CREATE_TIMEOUT_MS);
    noObjects();
    progress.mark("done");
    return result;
  } catch (err) {
    // The agent's own failure (e.g. its index-pack died) ends our stream at once.
    if (!transferError) stop.abort();
    await transfer;
    await lfsTransfer;
    // The local cause (e.g. pack-objects failing) explains more than the agent's "aborted".
    if (transferError) throw transferError instanceof RuntimeError ? transferError : new RuntimeError("input", String(transferError));
    throw err;
  } finally {
    channel.off("frame", onFrame);
    channel.end();
  }
}
