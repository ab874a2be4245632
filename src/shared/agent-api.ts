// The protocol between the runtime and its remote agent, in the one module both bundles compile
// against (docs/architecture.md "Runtime <-> agent protocol"). Physical details (paths, commits)
// stay inside this private protocol and never reach Paseo's public state.
//
// A conversation is one agent process on one channel. The runtime's first JSON frame is a request
// `{op, root, ...fields}` (AgentRequest); `root` is added by the transport, nowhere else.
//   * One-shot ops (AgentOps) answer with one `result` (value typed per op) or one `error` frame.
//     `workspace.create` and `workspace.export-objects` also carry data frames and the create
//     messages below before their answer.
//   * `exec.run` streams: ExecAgentMessage frames from the agent, ExecRuntimeMessage frames and
//     stdin data from the runtime, ending with `exit` or `error`.
// Each message, answer and request is declared once, as a schema (src/shared/guards.ts) whose
// type is inferred from it. No side trusts the other: answers and messages are checked against
// their schema before they are used, and each agent op parses its request with its schema (the
// fields an op has always tolerated, such as a missing subdirectory, are defaulted before that).
import { WIRE_ERROR_FIELDS } from "./errors.js";
import { SHA_RE } from "./git-exec.js";
import { normaliseRelativePath } from "./relative-path.js";
import { isSafeSubmoduleName } from "./submodule-name.js";
import { DiskInfo } from "./disk-space.js";
import { MAX_ATTACH_GEN, RESUME_TOKEN } from "./stream-replay.js";
import {
  allOf,
  arrayOf,
  intIn,
  isBoolean,
  isInteger,
  isNonEmptyString,
  isNull,
  isNumber,
  isPositiveInt,
  isRecord,
  isString,
  isUnknown,
  literal,
  matching,
  nullable,
  object,
  optional,
  parseJson,
  recordOf,
  refine,
  variant,
  windowDimension,
  withMessage,
  type Guard,
  type Infer,
} from "./guards.js";

// ---- signals ---------------------------------------------------------------------------------

/** Signals a runtime may forward or request; anything else is refused with `Unsupported signal`. */
export const EXEC_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"] as const;
export type ExecSignal = (typeof EXEC_SIGNALS)[number];
export const isExecSignal: Guard<ExecSignal> = literal(...EXEC_SIGNALS);

// ---- shapes shared by several ops ------------------------------------------------------------

/** A request field the agent needs as a string, with the line that says it is not one. */
function requestString(name: string, nonEmpty = true): Guard<string> {
  return withMessage(nonEmpty ? isNonEmptyString : isString, `agent request field ${name} must be a${nonEmpty ? " non-empty" : ""} string`);
}

const OWNER = { owner: requestString("owner") };

/** A pool runtime entry's identity in manifests (32 hex digits). */
const SCOPE = withMessage(matching(/^[a-f0-9]{32}$/), "agent request field scope must be 32 hex characters");

/** Which workspace, on behalf of which runtime instance (the manifest's owner). */
const WORKSPACE_TARGET_FIELDS = { workspaceId: requestString("workspaceId", false), ...OWNER };
export const WorkspaceTarget = object(WORKSPACE_TARGET_FIELDS);
export type WorkspaceTarget = Infer<typeof WorkspaceTarget>;

/** The Paseo-host repository and branch a workspace's work is merged back into. */
export const IntegrationTarget = object({
  /** Absolute path of the repository's top level on the Paseo host. */
  localPath: isString,
  baseBranch: isString,
  /** HMAC by the Paseo host's key (src/mirror/seal.ts): the host cannot forge or move it. */
  seal: optional(isString),
});
export type IntegrationTarget = Infer<typeof IntegrationTarget>;

const MALFORMED_SUBMODULES = "malformed submodule list in agent request";
const isCommit = matching(SHA_RE);
const isShallow = arrayOf(isCommit);

/** A path from the checkout's top level that stays inside it, as written (already normalised). */
const isInsideCheckout: Guard<string> = (v): v is string => {
  if (typeof v !== "string" || v === "") return false;
  try {
    return normaliseRelativePath(v) === v;
  } catch {
    return false;
  }
};

const MALFORMED_LFS = "malformed LFS pointers in agent request";

/** One LFS pointer of the committed tree. */
export const LfsPointer = object({
  path: isString,
  /** sha256 of the content, lowercase hex. */
  oid: matching(/^[0-9a-f]{64}$/),
  size: intIn(0, Number.MAX_SAFE_INTEGER),
  /** Whether the Paseo side's LFS store holds the content (it is shipped from there). */
  local: isBoolean,
});
export type LfsPointer = Infer<typeof LfsPointer>;

export const LfsSpec = withMessage(
  object({
    pointers: arrayOf(LfsPointer),
    /**
     * Set when the tree also holds pointer-shaped files that are not these pointers (they name an
     * object held here with another size): git lfs checkout must visit only these paths, since it
     * deletes a stored object whose size disagrees with a pointer it visits.
     */
    only: optional(isBoolean),
    /** The repository's real LFS endpoint, as the git config key to set in the checkout (none: git-lfs derives it). */
    endpoint: nullable(
      object({
        key: literal("lfs.url", "remote.origin.lfsurl"),
        url: (v): v is string => typeof v === "string" && !v.startsWith("-") && !/[\s\0]/.test(v),
      }),
    ),
  }),
  MALFORMED_LFS,
);
export type LfsSpec = Infer<typeof LfsSpec>;

/** A branch name git accepts under refs/remotes/origin/ (a stricter set: no option, no `..`, no control character). */
const isBranchName: Guard<string> = (v): v is string =>
  typeof v === "string" && /^[A-Za-z0-9_][A-Za-z0-9._/+-]{0,254}$/.test(v) && !/\.\.|\/\/|\.lock$|\/$|@\{/.test(v) && v !== "HEAD";

/** One of a submodule's remote-tracking branches. */
export const OriginBranch = object({ name: isBranchName, commit: isCommit });

/** A submodule's remote-tracking branches and the one origin's HEAD names (its clone's own branch). */
export const SubmoduleOrigin = object({
  branches: arrayOf(OriginBranch),
  head: nullable(isBranchName),
});
export type SubmoduleOrigin = Infer<typeof SubmoduleOrigin>;

/** One submodule of a directory source, recorded by the commit (src/workspace/submodules.ts). */
export const SubmoduleSpec = object({
  /** Names the submodule's object cache inside the project cache on the host. */
  key: matching(/^[0-9a-f]{32}$/),
  /** git's name for it in its parent's .gitmodules; its git dir is `<parent git dir>/modules/<name>`. */
  name: (v): v is string => typeof v === "string" && isSafeSubmoduleName(v),
  /** Path from the checkout's top level. */
  path: isInsideCheckout,
  /** Index of the submodule it is nested in (earlier in the list), -1 = the superproject. */
  parent: (v): v is number => Number.isInteger(v) && (v as number) >= -1,
  commit: isCommit,
  /** Its `origin`: the URL from .gitmodules, a relative one resolved as git resolves it. */
  url: (v): v is string => typeof v === "string" && v !== "" && !v.startsWith("-") && !/[\0\n]/.test(v),
  /** Its local repository's shallow boundary. */
  shallow: isShallow,
  /** Its commit's Git LFS pointers (paths inside the submodule), when its tree has any. */
  lfs: optional(LfsSpec),
  /** What a clone of its URL leaves, as its local repository knows it (absent: no such refs there). */
  origin: optional(SubmoduleOrigin),
});
export type SubmoduleSpec = Infer<typeof SubmoduleSpec>;

/** Submodules, each nested in one listed before it (parents before their children). */
export const SubmoduleList = withMessage(
  (v): v is SubmoduleSpec[] => Array.isArray(v) && v.every((m, i) => SubmoduleSpec(m) && m.parent < i),
  MALFORMED_SUBMODULES,
);

/** A source's shallow boundary; read by the agent with the submodules' line. */
export const ShallowBoundary = withMessage(isShallow, MALFORMED_SUBMODULES);

/** A remote name git accepts (refs/remotes/<name>/… must be a valid ref). */
export const isRemoteName: Guard<string> = (v): v is string => isBranchName(v);
/** A URL, refspec or ref written into the workspace's git config: no option, no line break, no NUL. */
export const isRemoteValue: Guard<string> = (v): v is string =>
  typeof v === "string" && v !== "" && !v.startsWith("-") && !/[\0\n\r]/.test(v);

/** One of the Paseo side repository's remotes, as `git remote -v` shows it (src/workspace/local-remotes.ts). */
export const RemoteSpec = object({
  name: isRemoteName,
  urls: arrayOf(isRemoteValue),
  /** Empty: pushes go to `urls`. */
  pushUrls: arrayOf(isRemoteValue),
  fetch: arrayOf(isRemoteValue),
});
export type RemoteSpec = Infer<typeof RemoteSpec>;

/** What the checked-out branch tracks, and the remote-tracking ref's commit when the Paseo side has it. */
export const UpstreamSpec = object({
  remote: isRemoteName,
  merge: isRemoteValue,
  tracking: optional(object({ ref: refine(isRemoteValue, (r) => r.startsWith("refs/remotes/")), commit: isCommit })),
});
export type UpstreamSpec = Infer<typeof UpstreamSpec>;

/** Objects for a directory source are shipped from the Paseo host into this project's cache. */
export const DirectorySourceSpec = allOf(
  withMessage(
    refine(
      object({
        kind: literal("directory"),
        /** sha256 of projectId + canonical source path (projectKey() in create-workspace.ts); names the remote cache. */
        projectKey: requestString("projectKey"),
        commit: requestString("commit"),
      }),
      (s) => /^[0-9a-f]{16,64}$/.test(s.projectKey) && SHA_RE.test(s.commit),
    ),
    "malformed directory source in agent request",
  ),
  object({
    /** The source repository's shallow boundary (its `shallow` file; absent or empty = complete history). */
    shallow: optional(ShallowBoundary),
    /** Submodules to materialize (the Paseo side has their commits), parents before their children. */
    submodules: optional(SubmoduleList),
    /** Branch to check out ("" = detached at `commit`). */
    branch: requestString("branch", false),
    /** Workspace root inside the checkout ("" = the checkout itself). */
    subdirectory: isString,
    /** The repository's remotes (absent: none; older runtimes sent none). */
    remotes: optional(withMessage(arrayOf(RemoteSpec), "malformed remotes in agent request")),
    upstream: optional(withMessage(UpstreamSpec, "malformed upstream in agent request")),
  }),
);
export type DirectorySourceSpec = Infer<typeof DirectorySourceSpec>;

/** Fetched by the agent on the remote host into a cache keyed by the URL. */
export const GitSourceSpec = object({
  kind: literal("git"),
  url: requestString("url"),
  /** "" = the remote's default branch; a branch name; a tag or a commit sha (detached). */
  revision: requestString("revision", false),
  /** Branch to create at the resolved commit ("" = keep what the revision gives). */
  newBranch: requestString("newBranch", false),
  subdirectory: isString,
});
export type GitSourceSpec = Infer<typeof GitSourceSpec>;

export const SourceSpec = withMessage(
  variant("kind", { directory: DirectorySourceSpec, git: GitSourceSpec }),
  "agent request has an unknown source kind",
);
export type SourceSpec = Infer<typeof SourceSpec>;

const isStringMap = recordOf(isString);

export const WorkspaceView = object({
  lifecycle: literal("ready", "paused"),
  /** Canonical remote path of the workspace root. */
  cwd: isString,
  lifecycleEnvironment: isStringMap,
});
export type WorkspaceView = Infer<typeof WorkspaceView>;

export const CreateResult = object({ view: WorkspaceView, materializedFreshContent: isBoolean });
export type CreateResult = Infer<typeof CreateResult>;

export const InspectResult = variant("status", {
  missing: object({ status: literal("missing") }),
  error: object({ status: literal("error"), message: isString }),
  ready: object({ status: literal("ready"), view: WorkspaceView }),
  paused: object({ status: literal("paused"), view: WorkspaceView }),
});
export type InspectResult = Infer<typeof InspectResult>;

/** What merge-to-base needs to know about a ready workspace. */
export const MergeInfo = object({
  /** Commit the workspace's checkout is at now. */
  head: isString,
  /** Commit the workspace was materialized from (the Paseo host has it). */
  createdFrom: isString,
  integration: IntegrationTarget,
});
export type MergeInfo = Infer<typeof MergeInfo>;

/**
 * A workspace's work as its checkout holds it (src/remote-agent/workspace/work-state.ts): what
 * comes back to the Paseo side (src/mirror/). Names and ids are the host's word: the runtime checks
 * each before it touches anything local.
 */
/** Who a workspace is, as its manifest records it: what a seal of its work home binds (src/mirror/seal.ts). */
const SEALED_WORKSPACE_FIELDS = {
  workspaceId: isString,
  /** The manifest's owner (the runtime instance the seal binds). */
  owner: isString,
  /** The commit the workspace was created from. */
  createdFrom: isString,
};

export const WorkState = object({
  ...SEALED_WORKSPACE_FIELDS,
  /** Where the work comes back to (null: a git source, or a workspace created before this existed). */
  workHome: nullable(object({ gitDir: isString, seal: isString })),
  /** The commit HEAD is at, and the branch it is on (null: detached). */
  head: nullable(isString),
  headRef: nullable(isString),
  /** Every local branch of the checkout (refs/heads/*, without the prefix). */
  branches: arrayOf(object({ name: isString, commit: isString })),
  /** Uncommitted work (modified tracked and untracked files not ignored) as one commit on HEAD; only when asked. */
  uncommitted: nullable(object({ commit: isString, tree: isString })),
  /** Names this state (commits, branches, uncommitted tree): destroy deletes without archiving only what was brought back. */
  token: isString,
});
export type WorkState = Infer<typeof WorkState>;

export const WorkStateRequest = object({
  ...WORKSPACE_TARGET_FIELDS,
  snapshot: isBoolean,
  /** Stop the workspace's processes first (destroy, reconcile): a snapshot they keep changing is never
   * the one the removal finds, so its work would go to the host's archive instead of coming back. */
  freeze: optional(isBoolean),
});
export type WorkStateRequest = Infer<typeof WorkStateRequest>;

/** A workspace that is missing or incomplete has no work state to report. */
export const WorkStateAnswer = object({ state: nullable(WorkState) });
export type WorkStateAnswer = Infer<typeof WorkStateAnswer>;

/** Work the host kept because nothing proved it was brought back (docs/workspaces.md). */
export const ArchivedWork = object({ path: isString, until: isString });
export type ArchivedWork = Infer<typeof ArchivedWork>;

/**
 * destroy and release-backing: `mirrored` is the token of the work state the runtime brought back;
 * a workspace whose work is anything else is archived on the host before it is removed.
 */
export const RemoveRequest = object({ ...WORKSPACE_TARGET_FIELDS, mirrored: optional(nullable(isString)) });
export type RemoveRequest = Infer<typeof RemoveRequest>;
export const RemoveResult = object({ archived: nullable(ArchivedWork) });
export type RemoveResult = Infer<typeof RemoveResult>;

export const ReconcileResult = object({
  removed: arrayOf(object({ workspaceId: isString, dir: isString, archived: optional(nullable(ArchivedWork)) })),
  /** With `list`: the orphans that would be removed (nothing is). */
  orphans: optional(arrayOf(isString)),
});
export type ReconcileResult = Infer<typeof ReconcileResult>;

/** What `facts` answers (read by `doctor`). */
export const HostFacts = object({
  os: isString,
  arch: isString,
  node: isString,
  nodePath: isString,
  git: nullable(isString),
  /** `git lfs version`, or null when git-lfs is not on the agent's PATH (LFS files stay pointers). */
  gitLfs: nullable(isString),
  root: isString,
  freeBytes: nullable(isNumber),
  /**
   * Who owns a PTY exec's terminal on this host: the host daemon through python3 or util-linux
   * `script` (the terminal survives a lost link), or sshd ("none": no way was found; `detail` says why).
   */
  terminal: object({ method: literal("python3", "script", "none"), detail: isString }),
});
export type HostFacts = Infer<typeof HostFacts>;

/** What `pool.load` answers: the live facts placement scores a pool's hosts on (src/workspace/pool/). */
export const HostLoad = object({
  /** Free bytes of the filesystem holding the root, and its block size (for the disk estimate). */
  freeBytes: nullable(isNumber),
  blockSize: isNumber,
  memAvailableBytes: isNumber,
  /** 1-minute load average divided by the CPU count. */
  loadPerCpu: isNumber,
  cpus: isInteger,
  /** Execs the answering agent process (the host daemon) supervises. */
  liveExecs: isInteger,
  /** Workspace directories under the root, of every owner. */
  workspaces: isInteger,
  /** The project's object cache exists here (its objects need not travel again). */
  warmCache: isBoolean,
  /** Asked with `holds`: this owner's workspace of that id is here (a create retried after its record was lost). */
  holds: optional(isBoolean),
  /** Asked with `inflight`: those of the ids whose workspace directory exists here (already counted in `workspaces`). */
  claimed: optional(arrayOf(isString)),
});
export type HostLoad = Infer<typeof HostLoad>;

/** One live process of a workspace (`exec.processes`, diagnostics and tests). */
export const ProcessInfo = object({ pid: isInteger, state: isString, command: isString });
export type ProcessInfo = Infer<typeof ProcessInfo>;

const PTY_SIZE = "Invalid PTY size";

export const ExecStdio = withMessage(
  variant("kind", {
    pipes: object({ kind: literal("pipes") }),
    pty: object({
      kind: literal("pty"),
      rows: withMessage(isPositiveInt, PTY_SIZE),
      cols: withMessage(isPositiveInt, PTY_SIZE),
      term: optional(isString),
    }),
  }),
  "exec request has an invalid stdio",
);
export type ExecStdio = Infer<typeof ExecStdio>;

// ---- requests --------------------------------------------------------------------------------

/** The integration target of a create: sealed, at an absolute path, on a branch that is not an option. */
export const SealedIntegration = withMessage(
  refine(
    object({ localPath: requestString("localPath"), baseBranch: requestString("baseBranch"), seal: requestString("seal") }),
    (i) => i.localPath.startsWith("/") && !i.baseBranch.startsWith("-") && /^[0-9a-f]{64}$/.test(i.seal),
  ),
  "malformed integration target in agent request",
);
export type SealedIntegration = Infer<typeof SealedIntegration>;

/**
 * Where a directory-source workspace's work comes back to: the git directory (the common one, for
 * a linked worktree) of the Paseo side repository it was created from, sealed like the integration
 * target (src/mirror/seal.ts), so a host cannot point the runtime at another repository.
 */
export const SealedRepo = withMessage(
  refine(
    object({ gitDir: requestString("gitDir"), seal: requestString("seal") }),
    (r) => r.gitDir.startsWith("/") && /^[0-9a-f]{64}$/.test(r.seal),
  ),
  "malformed work repository in agent request",
);
export type SealedRepo = Infer<typeof SealedRepo>;

export const CreateRequest = object({
  ...WORKSPACE_TARGET_FIELDS,
  source: SourceSpec,
  /** Lexically normalised relativeCwd ("" = root). */
  relativeCwd: isString,
  purpose: nullable(isString),
  /** Recorded for merge-to-base (directory sources whose base is a local branch). */
  integration: nullable(SealedIntegration),
  /** Where the workspace's commits come back to (directory sources; docs/workspaces.md "Work comes back"). */
  workHome: optional(nullable(SealedRepo)),
  /** The commit's Git LFS pointers (directory sources whose tree has any; src/workspace/lfs-objects.ts). */
  lfs: optional(nullable(LfsSpec)),
  /** The pool runtime entry that places it (src/workspace/pool/pool-options.ts poolScope); reconcile of another entry leaves it alone. */
  scope: optional(nullable(SCOPE)),
  /** Git in the workspace reaches the Paseo side's forwarded ssh-agent (runtime option forwardAgent). */
  forwardAgent: optional(isBoolean),
  /** Git in the workspace asks the Paseo side's credential helpers (runtime option forwardGitCredentials). */
  forwardGitCredentials: optional(isBoolean),
});
export type CreateRequest = Infer<typeof CreateRequest>;

/** A resume token (src/shared/stream-replay.ts). */
const isToken = matching(RESUME_TOKEN);
const isAttachGen = intIn(0, MAX_ATTACH_GEN);

/**
 * The request of `exec.run`, checked by the agent (which trusts no input) field by field in this
 * order, each failure with its own line.
 */
export const ExecRunRequest = object({
  argv: withMessage((v): v is string[] => arrayOf(isString)(v) && v.length > 0, "exec request has no argv"),
  env: withMessage(isStringMap, "exec request env must map strings to strings"),
  cwd: optional(withMessage(isString, "exec request cwd must be a string")),
  stdio: ExecStdio,
  workspaceId: withMessage(isNonEmptyString, "exec request has no workspaceId"),
  owner: withMessage(isNonEmptyString, "exec request has no owner"),
  execId: withMessage(isNonEmptyString, "exec request has no execId"),
  /**
   * Present when the wrapper can re-attach (src/shared/stream-replay.ts): a random 128-bit token (hex) that
   * names the session inside frames only, and how long a detached session waits for it.
   */
  resume: optional(
    withMessage(object({ token: isToken, graceMs: intIn(0, Number.MAX_SAFE_INTEGER) }), "exec request has an invalid resume field"),
  ),
});
export type ExecRunRequest = Infer<typeof ExecRunRequest>;

/**
 * Re-attaches a wrapper to its detached exec: `received` = the last down frame it holds; `gen` =
 * which attachment this is (the wrapper counts them from 1; exec.run is 0): a client-gone naming an
 * older one is ignored (see ClientGoneHeader).
 */
export const ExecAttachRequest = withMessage(
  object({ token: isToken, received: intIn(0, Number.MAX_SAFE_INTEGER), gen: isAttachGen }),
  "exec.attach needs a resume token, the last frame received and its attach generation",
);
export type ExecAttachRequest = Infer<typeof ExecAttachRequest>;

/** A request with no fields besides `op` and `root`. */
const NoFields = object({});

export const PoolLoadRequest = object({
  projectKey: withMessage(nullable(matching(/^[a-f0-9]{32}$/)), "pool.load projectKey must be null or 32 hex characters"),
  /** A workspace to look for (a create whose placement record is missing). */
  holds: optional(
    withMessage(object({ workspaceId: isNonEmptyString, owner: isNonEmptyString }), "pool.load holds must name a workspace and owner"),
  ),
  /** Workspace ids of creates under way towards this host (reservations), to tell which already claimed their directory. */
  inflight: optional(withMessage(arrayOf(isNonEmptyString), "pool.load inflight must be an array of workspace ids")),
});
export type PoolLoadRequest = Infer<typeof PoolLoadRequest>;

export const ReconcileRequest = object({
  ...OWNER,
  workspaceIds: withMessage(arrayOf(isString), "reconcile requires workspaceIds"),
  /** Only name the orphans, remove nothing (the runtime brings their work back first). */
  list: optional(isBoolean),
  /** Orphan id → the token of the work state brought back (see RemoveRequest). */
  mirrored: optional(recordOf(isString)),
  /** Only workspaces created with this scope (absent: those created without one, by a single host) are orphans. */
  scope: optional(nullable(SCOPE)),
});
export type ReconcileRequest = Infer<typeof ReconcileRequest>;

/** Re-owns a workspace whose manifest names `from` as its owner. */
export const AdoptRequest = object({ ...WORKSPACE_TARGET_FIELDS, from: requestString("from") });
export type AdoptRequest = Infer<typeof AdoptRequest>;

/**
 * The commits the Paseo side has: the pack leaves out what they reach. `wants`: the commits to
 * send (each must be a commit of the checkout; default its HEAD).
 */
export const ExportObjectsRequest = object({
  ...WORKSPACE_TARGET_FIELDS,
  haves: arrayOf(isString),
  wants: optional(withMessage(arrayOf(isCommit), "export-objects wants must be commit ids")),
});
export type ExportObjectsRequest = Infer<typeof ExportObjectsRequest>;

const NEEDS_IDS = "signal request needs workspaceId and execId";

/** The out-of-band `signal` operation; `waitMs` bounds the wait for the tree to be gone. */
export const ExecSignalRequest = object({
  /** Refused with a line that names the value (`Unsupported signal: …`), made by the agent. */
  signal: isExecSignal,
  workspaceId: withMessage(isNonEmptyString, NEEDS_IDS),
  execId: withMessage(isNonEmptyString, NEEDS_IDS),
  owner: isString,
  waitMs: optional(isNumber),
});
export type ExecSignalRequest = Infer<typeof ExecSignalRequest>;

/** Diagnostics: a destroyed workspace's leftovers are listed too, so `owner` may match nothing. */
export const ExecProcessesRequest = object({
  workspaceId: withMessage(isNonEmptyString, "processes request needs workspaceId"),
  owner: isString,
});
export type ExecProcessesRequest = Infer<typeof ExecProcessesRequest>;

/** Each one-shot op: the fields of its request (besides `op` and `root`) and the value it answers. */
// ---- git credentials (host → Paseo side; docs/architecture.md "Asks") ---------------------------

/** A value of git's credential protocol (git-credential(1)): one line, bounded. */
const isCredentialValue: Guard<string> = (v): v is string => typeof v === "string" && v.length <= 4096 && !/[\0\n\r]/.test(v);

/**
 * The attributes of git's request that are relayed; anything else git sends (capabilities,
 * `wwwauth[]`, …) stays on the host. `password` only in `store`/`erase`.
 */
export const CredentialAttributes = withMessage(
  object({
    protocol: isCredentialValue,
    host: isCredentialValue,
    path: optional(isCredentialValue),
    username: optional(isCredentialValue),
    password: optional(isCredentialValue),
  }),
  "malformed git credential attributes",
);
export type CredentialAttributes = Infer<typeof CredentialAttributes>;

/** git's operation on a credential helper: `fill` runs `get`, `approve` `store`, `reject` `erase`. */
export const CredentialAction = withMessage(literal("get", "store", "erase"), "git credential action must be get, store or erase");
export type CredentialAction = Infer<typeof CredentialAction>;

/** `git.credential`: our credential helper in a workspace's git, on behalf of that workspace (its directory's key). */
export const GitCredentialRequest = object({
  workspaceKey: withMessage(matching(/^[0-9a-f]{20}$/), "git.credential needs the workspace's key (20 hex characters)"),
  action: CredentialAction,
  attributes: CredentialAttributes,
});
export type GitCredentialRequest = Infer<typeof GitCredentialRequest>;

/**
 * The daemon's ask to the Paseo side (topic `git-credential`): the workspace as its manifest
 * records it, with the sealed home that names the Paseo side repository (src/mirror/seal.ts).
 */
export const GitCredentialAsk = object({
  ...SEALED_WORKSPACE_FIELDS,
  workHome: SealedRepo,
  action: CredentialAction,
  attributes: CredentialAttributes,
});
export type GitCredentialAsk = Infer<typeof GitCredentialAsk>;

/** The Paseo side's answer (and the helper's): a credential for `get`, or why there is none. */
export const GitCredentialAnswer = object({
  username: optional(isCredentialValue),
  password: optional(isCredentialValue),
  /** One line for git's stderr: why nothing was answered (or stored). */
  refused: optional(isString),
});
export type GitCredentialAnswer = Infer<typeof GitCredentialAnswer>;

/**
 * Each one-shot op: the fields of its request (besides `op` and `root`) and the value it answers,
 * from the one table AGENT_OPS (below): the runtime's callAgent types, the answer check and the
 * daemon's exhaustive dispatch (OneShotHandlers) all derive from it.
 */
// An interface (not the mapped type itself): its members are resolved per op, so a caller generic
// over several ops with the same request (lifecycle-command.ts) still type-checks.
export interface AgentOps extends OpTypes {}
type OpTypes = {
  [Op in keyof typeof AGENT_OPS]: { request: Infer<(typeof AGENT_OPS)[Op]["request"]>; response: Infer<(typeof AGENT_OPS)[Op]["answer"]> };
};

export type OneShotOp = keyof AgentOps;
/** Streaming ops: they send their own messages until the exec (or the attachment) ends. */
export type StreamingOp = "exec.run" | "exec.attach";
export type AgentOp = OneShotOp | StreamingOp;
export type OpRequest<Op extends OneShotOp> = AgentOps[Op]["request"];
export type RequestFields<Op extends AgentOp> = Op extends OneShotOp
  ? OpRequest<Op>
  : Op extends "exec.attach"
    ? ExecAttachRequest
    : ExecRunRequest;
export type AgentAnswer<Op extends OneShotOp> = AgentOps[Op]["response"];

/** The first frame of a conversation. */
export type AgentRequest<Op extends AgentOp = AgentOp> = { op: Op; root: string } & RequestFields<Op>;

// ---- stream headers (Paseo side → host daemon) -----------------------------------------------

/**
 * The OPEN header of a stream to the host daemon: an agent conversation, a request to retire, or
 * a client-gone notice. The last is how a client-gone reset the lost channel could not carry
 * reaches the daemon on the next one: it names the resumable exec's conversation (its token and
 * attach generation), and the daemon abandons that exec unless its wrapper has asked for a later
 * attachment since (src/shared/stream-replay.ts); the daemon ends the stream once it has applied it.
 */
export const ClientGoneHeader = object({ kind: literal("client-gone"), token: isToken, gen: isAttachGen });
export type ClientGoneHeader = Infer<typeof ClientGoneHeader>;

/** An agent conversation (one op, or one exec's conversation). */
export const AgentHeader = object({ kind: literal("agent") });
/** Asks the daemon to exit once no exec is live and no stream open. */
export const RetireHeader = object({ kind: literal("retire") });
/**
 * The one stream on which the host tells the Paseo side what it should know (NoticeMessage): the
 * broker opens it on every new channel; the daemon answers with a snapshot of every notice it
 * holds, then each change. It is not work: it keeps neither the daemon nor the channel from idling.
 * `answers`: the ask topics this broker answers on it (HOST_ASK_TOPICS; none: it answers no ask).
 */
export const NoticesHeader = object({ kind: literal("notices"), answers: optional(arrayOf(isNonEmptyString)) });

/** Every stream the Paseo side may open on the daemon's channel, told apart by `kind`. */
export const StreamHeader = variant("kind", {
  agent: AgentHeader,
  retire: RetireHeader,
  "client-gone": ClientGoneHeader,
  notices: NoticesHeader,
});
export type StreamHeader = Infer<typeof StreamHeader>;

/**
 * The headers as the openers build them (checked against StreamHeader by the compiler), so that no
 * kind is spelled outside this declaration. Field order is the wire's: a daemon of another build
 * (a retire sent to an older one) reads the same bytes as before.
 */
export const streamHeader = {
  agent: Object.freeze({ kind: "agent" }) satisfies StreamHeader,
  retire: Object.freeze({ kind: "retire" }) satisfies StreamHeader,
  clientGone: (token: string, gen: number): ClientGoneHeader => ({ kind: "client-gone", token, gen }),
  notices: (answers: readonly string[]): StreamHeader => ({ kind: "notices", ...(answers.length > 0 ? { answers: [...answers] } : {}) }),
};

// ---- notices (host daemon → Paseo side, on the notices stream) --------------------------------

/**
 * What the host says about one `key` of one `kind` (kind "ports": key = a workspace id): the
 * fields beside kind and key are the kind's payload, the key's whole current state (a notice
 * replaces the one before it); `gone`: the key has no state any more.
 */
export const Notice = object({ kind: isNonEmptyString, key: isString, gone: optional(literal(true)) });
export type Notice = Infer<typeof Notice> & Record<string, unknown>;

/** One port a workspace's process listens on, as the daemon's port watch reports it. */
export const PortEntry = object({
  port: isInteger,
  pid: isInteger,
  argv0: isString,
  /** When the daemon first saw it listen (ms since the epoch). */
  since: isInteger,
  addresses: optional(arrayOf(isString)),
  /** Named in a live exec's env for Paseo's services (PASEO_PORT, …). */
  named: optional(literal(true)),
});
export type PortEntry = Infer<typeof PortEntry>;

/**
 * Every kind of notice the host publishes, with its payload (checked on the whole notice; a gone
 * one has none): with HOST_ASK_TOPICS below, all the host can say to the Paseo side unasked. The
 * broker drops a notice of another kind, or with a payload that does not match, as it arrives.
 */
export const NOTICE_KINDS = {
  /** key: a workspace id; the TCP ports its own processes listen on (port-watch.ts → port-forwards.ts). */
  ports: object({ ports: arrayOf(PortEntry) }),
  /** key: a workspace id; its refs moved (work-watch.ts → the runtime's work-notice op, hand-off.ts). */
  work: object({ state: WorkState }),
  /** Published only from the test hooks file (remote-agent/test-hooks.ts): any payload. */
  test: isRecord,
} satisfies Record<string, Guard<Record<string, unknown>>>;
export type NoticeKind = keyof typeof NOTICE_KINDS;
export type NoticePayload<K extends NoticeKind> = Infer<(typeof NOTICE_KINDS)[K]>;
/** A notice of kind K as its handler gets it: the key's payload, or gone. */
export type KindNotice<K extends NoticeKind> =
  { kind: K; key: string; gone: true } | ({ kind: K; key: string; gone?: undefined } & NoticePayload<K>);

/** Why `n` is no notice this build declares (`unknown`: its kind is not; `malformed`: its payload); null when it is one. */
export function noticeProblem(n: Notice): { problem: "unknown" | "malformed"; why: string } | null {
  if (!Object.hasOwn(NOTICE_KINDS, n.kind)) return { problem: "unknown", why: `a notice of unknown kind ${JSON.stringify(n.kind)}` };
  // A plain predicate: a guard's false would narrow `n` away.
  const fits: (v: unknown) => boolean = NOTICE_KINDS[n.kind as NoticeKind];
  if (n.gone || fits(n)) return null;
  return { problem: "malformed", why: `a malformed ${n.kind} notice for ${JSON.stringify(n.key)}` };
}

/**
 * The notices stream's Json frames: first (and again whenever the stream fell behind) a snapshot
 * of every notice the daemon holds, which replaces everything the receiver held; then changes.
 */
export const NoticeMessage = variant("type", {
  snapshot: object({ type: literal("snapshot"), notices: arrayOf(Notice) }),
  notice: object({ type: literal("notice"), notice: Notice }),
  ask: object({ type: literal("ask"), id: isPositiveInt, topic: isNonEmptyString, body: isUnknown }),
});
export type NoticeMessage = Infer<typeof NoticeMessage>;

/**
 * Asks: the host's requests to the Paseo side, the one way the host asks for something (a
 * credential for git in a workspace). They ride the notices stream of a broker that declared the
 * topic in its header: `ask` down, one `answer` (the same id) up. Each topic's body and answer
 * have their schemas (git-credential: GitCredentialAsk, GitCredentialAnswer). An ask whose stream
 * closes, or that is not answered in time, is answered null on the host, at once.
 */
export const HOST_ASK_TOPICS = ["git-credential"] as const;
export type HostAskTopic = (typeof HOST_ASK_TOPICS)[number];

/** The broker's answer to an ask, on the same notices stream (`body` null: no answer). */
export const AskAnswer = object({ type: literal("answer"), id: isPositiveInt, body: isUnknown });
export type AskAnswer = Infer<typeof AskAnswer>;

// ---- messages --------------------------------------------------------------------------------

/** The single answer of a one-shot op; `value` is checked against the op's answer schema. */
export const ResultMessage = object({ type: literal("result"), value: isUnknown });
export type ResultMessage = Infer<typeof ResultMessage>;

/** The failure of any op (one-shot or exec), as a classified one-line message (`code`: see FailureCode). */
export const ErrorMessage = object({ type: literal("error"), ...WIRE_ERROR_FIELDS });
export type ErrorMessage = Infer<typeof ErrorMessage>;

/** create, agent → runtime: send the objects of the source commit not reachable from `haves`. */
export const NeedObjectsMessage = object({
  type: literal("need-objects"),
  haves: arrayOf(isString),
  /** The submodules (SubmoduleSpec.key) these objects are for, all in one pack; absent = the superproject. */
  modules: optional(arrayOf(isString)),
  /** The cache's shallow boundary: commits whose parents it lacks (the runtime sends those it has). */
  shallow: optional(arrayOf(isString)),
  /** Free space under the remote root, so a transfer that cannot fit is refused before it starts. */
  disk: optional(DiskInfo),
  /** Milliseconds the agent spent on the request before this message: the rest is the link's. */
  agentMs: optional(isNumber),
});
export type NeedObjectsMessage = Infer<typeof NeedObjectsMessage>;

/** create, agent → runtime: send these LFS objects (content, in this order, then Eof); may be none. */
export const NeedLfsMessage = object({ type: literal("need-lfs"), oids: arrayOf(isString) });
export type NeedLfsMessage = Infer<typeof NeedLfsMessage>;

/** create, agent → runtime: these LFS files stay pointer files in the workspace, and why. */
export const LfsPointersMessage = object({ type: literal("lfs-pointers"), paths: arrayOf(isString), reason: isString });
export type LfsPointersMessage = Infer<typeof LfsPointersMessage>;

/** create, agent → runtime: progress marks. */
export const ProgressMessage = object({ type: literal("progress"), phase: literal("negotiate", "checkout") });
export type ProgressMessage = Infer<typeof ProgressMessage>;

/** create, runtime → agent: the runtime failed part-way; roll back. */
export const AbortMessage = object({ type: literal("abort"), message: isString });
export type AbortMessage = Infer<typeof AbortMessage>;

/** exec (PTY), agent → runtime: open a PTY channel running `pty-attach <token>`. */
export const PtyTokenMessage = object({ type: literal("pty-token"), token: isString });
export type PtyTokenMessage = Infer<typeof PtyTokenMessage>;

/** exec, agent → runtime: the identity is on disk (the exec can be signalled from now on). */
export const StartedMessage = object({ type: literal("started"), pid: nullable(isInteger) });
export type StartedMessage = Infer<typeof StartedMessage>;

/**
 * exec, both ways, not numbered itself: every numbered frame up to `seq` was processed (down: its
 * bytes reached Paseo's fd1/fd2/fd4; up: stdin taken by the workload, signal delivered, resize
 * applied). See src/shared/stream-replay.ts.
 */
export const AckMessage = object({ type: literal("ack"), seq: isInteger });
export type AckMessage = Infer<typeof AckMessage>;

/** exec.attach, agent → runtime, not numbered: the session is yours; `received` = last up frame it holds. */
export const AttachedMessage = object({ type: literal("attached"), received: isInteger });
export type AttachedMessage = Infer<typeof AttachedMessage>;

/** exec (PTY), agent → runtime: whether the remote terminal shows the size of resize `id`. */
export const ResizedMessage = object({ type: literal("resized"), id: isInteger, ok: isBoolean });
export type ResizedMessage = Infer<typeof ResizedMessage>;

/** exec, agent → runtime: the workload's real wait status; nothing follows. */
export const ExitMessage = object({ type: literal("exit"), code: nullable(isInteger), signal: nullable(isString) });
export type ExitMessage = Infer<typeof ExitMessage>;

/** exec, runtime → agent: deliver a signal to the workload. */
export const SignalMessage = object({ type: literal("signal"), signal: isExecSignal });
export type SignalMessage = Infer<typeof SignalMessage>;

/** exec (PTY), runtime → agent: confirm the terminal shows this size, answering `resized`. */
export const ResizeMessage = object({ type: literal("resize"), id: isInteger, rows: isPositiveInt, cols: isPositiveInt });
export type ResizeMessage = Infer<typeof ResizeMessage>;

const EXEC_AGENT_MESSAGES = {
  "pty-token": PtyTokenMessage,
  started: StartedMessage,
  ack: AckMessage,
  attached: AttachedMessage,
  resized: ResizedMessage,
  exit: ExitMessage,
  error: ErrorMessage,
};
const EXEC_RUNTIME_MESSAGES = { signal: SignalMessage, ack: AckMessage, resize: ResizeMessage };

/** Every JSON frame an agent sends. */
const AgentMessage = variant("type", {
  result: ResultMessage,
  "need-objects": NeedObjectsMessage,
  "need-lfs": NeedLfsMessage,
  "lfs-pointers": LfsPointersMessage,
  progress: ProgressMessage,
  ...EXEC_AGENT_MESSAGES,
});
/** Every JSON frame a runtime sends after its request. */
const RuntimeMessage = variant("type", { abort: AbortMessage, ...EXEC_RUNTIME_MESSAGES });

export type ExecAgentMessage = Infer<(typeof EXEC_AGENT_MESSAGES)[keyof typeof EXEC_AGENT_MESSAGES]>;
export type ExecRuntimeMessage = Infer<(typeof EXEC_RUNTIME_MESSAGES)[keyof typeof EXEC_RUNTIME_MESSAGES]>;
export type AgentMessage = Infer<typeof AgentMessage>;
export type RuntimeMessage = Infer<typeof RuntimeMessage>;

function decode<M>(guard: Guard<M>, payload: Buffer | string): M | null {
  const value = parseJson(payload);
  return guard(value) ? value : null;
}

/** An agent's JSON frame, or null when it is not one of the messages above. */
export function decodeAgentMessage(payload: Buffer | string): AgentMessage | null {
  return decode(AgentMessage, payload);
}

/** A runtime's JSON frame after the request, or null when it is not one of the messages above. */
export function decodeRuntimeMessage(payload: Buffer | string): RuntimeMessage | null {
  const msg = decode(RuntimeMessage, payload);
  // A peer's numbers are clamped to what the terminal can take.
  if (msg?.type === "resize") return { ...msg, rows: windowDimension(msg.rows), cols: windowDimension(msg.cols) };
  return msg;
}

/** One op of the table: its request's guard (fields besides `op` and `root`) and its answer's. */
interface OpDeclaration {
  request: Guard<Record<string, unknown>>;
  answer: Guard<unknown>;
}

/**
 * Every one-shot op, declared once: what it takes and what it may answer (a runtime refuses any
 * other value). Adding one here makes the daemon's handler registry fail to compile until it has
 * a handler answering that type.
 */
export const AGENT_OPS = {
  ping: { request: NoFields, answer: object({ pong: literal(true) }) },
  facts: { request: NoFields, answer: HostFacts },
  "pool.load": { request: PoolLoadRequest, answer: HostLoad },
  "workspace.create": { request: CreateRequest, answer: CreateResult },
  "workspace.inspect": { request: WorkspaceTarget, answer: InspectResult },
  "workspace.pause": { request: WorkspaceTarget, answer: isNull },
  "workspace.resume": { request: WorkspaceTarget, answer: WorkspaceView },
  "workspace.destroy": { request: RemoveRequest, answer: RemoveResult },
  "workspace.release-backing": { request: RemoveRequest, answer: RemoveResult },
  /** The workspace's work (WorkState); `snapshot` records uncommitted work as a commit first. */
  "workspace.work-state": { request: WorkStateRequest, answer: WorkStateAnswer },
  "workspace.reconcile": { request: ReconcileRequest, answer: ReconcileResult },
  "workspace.merge-info": { request: WorkspaceTarget, answer: MergeInfo },
  "workspace.adopt": { request: AdoptRequest, answer: isNull },
  /** Streams a pack of HEAD minus `haves` (Stdout frames, then Eof) before answering. */
  "workspace.export-objects": { request: ExportObjectsRequest, answer: object({ head: isString, bytes: isInteger }) },
  "exec.signal": { request: ExecSignalRequest, answer: object({ state: isString }) },
  "exec.processes": { request: ExecProcessesRequest, answer: object({ processes: arrayOf(ProcessInfo) }) },
  /** From our credential helper on the host: relayed to the Paseo side (forwardGitCredentials). */
  "git.credential": { request: GitCredentialRequest, answer: GitCredentialAnswer },
} satisfies Record<string, OpDeclaration>;

/** True when `value` is what `op` answers. */
export function isAnswer<Op extends OneShotOp>(op: Op, value: unknown): value is AgentAnswer<Op> {
  const answer: Guard<unknown> = AGENT_OPS[op].answer;
  return answer(value);
}
