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
// No side trusts the other: answers and messages are checked with the guards below before they
// are used; a request's fields are checked by the agent op that reads them.
import { EXIT_CODES, type ErrorClass } from "./errors.js";
import type { DiskInfo } from "./disk-space.js";
import {
  arrayOf,
  isBoolean,
  isInteger,
  isNumber,
  isPositiveInt,
  windowDimension,
  isRecord,
  isString,
  literal,
  nullable,
  object,
  oneOf,
  optional,
  parseJson,
  recordOf,
  type Guard,
} from "./guards.js";

// ---- signals ---------------------------------------------------------------------------------

/** Signals a runtime may forward or request; anything else is refused with `Unsupported signal`. */
export const EXEC_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"] as const;
export type ExecSignal = (typeof EXEC_SIGNALS)[number];
export const isExecSignal: Guard<ExecSignal> = literal(...EXEC_SIGNALS);

// ---- shapes shared by several ops ------------------------------------------------------------

/** Which workspace, on behalf of which runtime instance (the manifest's owner). */
export interface WorkspaceTarget {
  workspaceId: string;
  owner: string;
}

/** The Paseo-host repository and branch a workspace's work is merged back into. */
export interface IntegrationTarget {
  /** Absolute path of the repository's top level on the Paseo host. */
  localPath: string;
  baseBranch: string;
  /** HMAC by the Paseo host's key (src/workspace/integration-seal.ts): the host cannot forge or move it. */
  seal?: string;
}

/** Objects for a directory source are shipped from the Paseo host into this project's cache. */
export interface DirectorySourceSpec {
  kind: "directory";
  /** sha256 of projectId + canonical source path (projectKey() in create-workspace.ts); names the remote cache. */
  projectKey: string;
  commit: string;
  /** Branch to check out ("" = detached at `commit`). */
  branch: string;
  /** Workspace root inside the checkout ("" = the checkout itself). */
  subdirectory: string;
  /** The source repository's shallow boundary (its `shallow` file; absent or empty = complete history). */
  shallow?: string[];
  /** Submodules to materialize (the Paseo side has their commits), parents before their children. */
  submodules?: SubmoduleSpec[];
}

/** One submodule of a directory source, recorded by the commit (src/workspace/submodules.ts). */
export interface SubmoduleSpec {
  /** Names the submodule's object cache inside the project cache on the host. */
  key: string;
  /** git's name for it in its parent's .gitmodules; its git dir is `<parent git dir>/modules/<name>`. */
  name: string;
  /** Path from the checkout's top level. */
  path: string;
  /** Index of the submodule it is nested in (earlier in the list), -1 = the superproject. */
  parent: number;
  commit: string;
  /** Its `origin`: the URL from .gitmodules, a relative one resolved as git resolves it. */
  url: string;
  /** Its local repository's shallow boundary. */
  shallow: string[];
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

/** What `facts` answers (read by `doctor`). */
export interface HostFacts {
  os: string;
  arch: string;
  node: string;
  nodePath: string;
  git: string | null;
  /** `git lfs version`, or null when git-lfs is not on the agent's PATH (LFS files stay pointers). */
  gitLfs: string | null;
  root: string;
  freeBytes: number | null;
  /**
   * Who owns a PTY exec's terminal on this host: the host daemon through python3 or util-linux
   * `script` (the terminal survives a lost link), or sshd ("none": no way was found; `detail` says why).
   */
  terminal: { method: "python3" | "script" | "none"; detail: string };
}

/** What `pool.load` answers: the live facts placement scores a pool's hosts on (src/broker/host-pool/). */
export interface HostLoad {
  /** Free bytes of the filesystem holding the root, and its block size (for the disk estimate). */
  freeBytes: number | null;
  blockSize: number;
  memAvailableBytes: number;
  /** 1-minute load average divided by the CPU count. */
  loadPerCpu: number;
  cpus: number;
  /** Execs the answering agent process (the host daemon) supervises. */
  liveExecs: number;
  /** Workspace directories under the root, of every owner. */
  workspaces: number;
  /** The project's object cache exists here (its objects need not travel again). */
  warmCache: boolean;
}

/** One live process of a workspace (`exec.processes`, diagnostics and tests). */
export interface ProcessInfo {
  pid: number;
  state: string;
  command: string;
}

export type ExecStdio = { kind: "pipes" } | { kind: "pty"; rows: number; cols: number; term?: string };

// ---- requests --------------------------------------------------------------------------------

export interface CreateRequest extends WorkspaceTarget {
  source: SourceSpec;
  /** Lexically normalised relativeCwd ("" = root). */
  relativeCwd: string;
  purpose: string | null;
  /** Recorded for merge-to-base (directory sources whose base is a local branch). */
  integration: IntegrationTarget | null;
  /** The commit's Git LFS pointers (directory sources whose tree has any; src/workspace/lfs-objects.ts). */
  lfs?: LfsSpec | null;
}

/** One LFS pointer of the committed tree. */
export interface LfsPointer {
  path: string;
  /** sha256 of the content, lowercase hex. */
  oid: string;
  size: number;
  /** Whether the Paseo side's LFS store holds the content (it is shipped from there). */
  local: boolean;
}

export interface LfsSpec {
  pointers: LfsPointer[];
  /** The repository's real LFS endpoint, as the git config key to set in the checkout (none: git-lfs derives it). */
  endpoint: { key: "lfs.url" | "remote.origin.lfsurl"; url: string } | null;
}

export interface ExecRunRequest extends WorkspaceTarget {
  execId: string;
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
  stdio: ExecStdio;
  /**
   * Present when the wrapper can re-attach (src/shared/stream-replay.ts): a random 128-bit token (hex) that
   * names the session inside frames only, and how long a detached session waits for it.
   */
  resume?: { token: string; graceMs: number };
}

/**
 * Re-attaches a wrapper to its detached exec: `received` = the last down frame it holds; `gen` =
 * which attachment this is (the wrapper counts them from 1; exec.run is 0): an abandon naming an
 * older one is ignored (see exec.abandon).
 */
export interface ExecAttachRequest {
  token: string;
  received: number;
  gen: number;
}

/** A request with no fields besides `op` and `root`. */
export type NoFields = Record<never, never>;

/** Each one-shot op: the fields of its request (besides `op` and `root`) and the value it answers. */
export interface AgentOps {
  ping: { request: NoFields; response: { pong: true } };
  facts: { request: NoFields; response: HostFacts };
  "pool.load": { request: { projectKey: string | null }; response: HostLoad };
  "workspace.create": { request: CreateRequest; response: CreateResult };
  "workspace.inspect": { request: WorkspaceTarget; response: InspectResult };
  "workspace.pause": { request: WorkspaceTarget; response: null };
  "workspace.resume": { request: WorkspaceTarget; response: WorkspaceView };
  "workspace.destroy": { request: WorkspaceTarget; response: null };
  "workspace.release-backing": { request: WorkspaceTarget; response: null };
  "workspace.reconcile": { request: { owner: string; workspaceIds: string[] }; response: ReconcileResult };
  "workspace.merge-info": { request: WorkspaceTarget; response: MergeInfo };
  /** Re-owns a workspace whose manifest names `from` as its owner. */
  "workspace.adopt": { request: WorkspaceTarget & { from: string }; response: null };
  /** Streams a pack of HEAD minus `haves` (Stdout frames, then Eof) before answering. */
  "workspace.export-objects": { request: WorkspaceTarget & { haves: string[] }; response: { head: string; bytes: number } };
  /** The out-of-band `signal` operation; `waitMs` bounds the wait for the tree to be gone. */
  "exec.signal": { request: WorkspaceTarget & { execId: string; signal: ExecSignal; waitMs?: number }; response: { state: string } };
  "exec.processes": { request: WorkspaceTarget; response: { processes: ProcessInfo[] } };
  /**
   * The wrapper of a resumable exec went away while the link was down: reap it now (unknown tokens:
   * no-op). `gen`: the attachment whose client went away; one older than the exec's latest attach
   * is ignored (the wrapper is alive and came back on another conversation).
   */
  "exec.abandon": { request: { token: string; gen: number }; response: null };
}

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

// ---- messages --------------------------------------------------------------------------------

/** The single answer of a one-shot op; `value` is checked against the op's answer guard. */
export interface ResultMessage {
  type: "result";
  value: unknown;
}

/** The failure of any op (one-shot or exec), as a classified one-line message. */
export interface ErrorMessage {
  type: "error";
  errorClass: ErrorClass;
  message: string;
}

/** create, agent → runtime: send the objects of the source commit not reachable from `haves`. */
export interface NeedObjectsMessage {
  type: "need-objects";
  haves: string[];
  /** The submodule (SubmoduleSpec.key) these objects are for; absent = the superproject. */
  module?: string;
  /** The cache's shallow boundary: commits whose parents it lacks (the runtime sends those it has). */
  shallow?: string[];
  /** Free space under the remote root, so a transfer that cannot fit is refused before it starts. */
  disk?: DiskInfo;
  /** Milliseconds the agent spent on the request before this message: the rest is the link's. */
  agentMs?: number;
}

/** create, agent → runtime: send these LFS objects (content, in this order, then Eof); may be none. */
export interface NeedLfsMessage {
  type: "need-lfs";
  oids: string[];
}

/** create, agent → runtime: these LFS files stay pointer files in the workspace, and why. */
export interface LfsPointersMessage {
  type: "lfs-pointers";
  paths: string[];
  reason: string;
}

/** create, agent → runtime: progress marks. */
export interface ProgressMessage {
  type: "progress";
  phase: "negotiate" | "checkout";
}

/** create, runtime → agent: the runtime failed part-way; roll back. */
export interface AbortMessage {
  type: "abort";
  message: string;
}

/** exec (PTY), agent → runtime: open a PTY channel running `pty-attach <token>`. */
export interface PtyTokenMessage {
  type: "pty-token";
  token: string;
}

/** exec, agent → runtime: the identity is on disk (the exec can be signalled from now on). */
export interface StartedMessage {
  type: "started";
  pid: number | null;
}

/**
 * exec, both ways, not numbered itself: every numbered frame up to `seq` was processed (down: its
 * bytes reached Paseo's fd1/fd2/fd4; up: stdin taken by the workload, signal delivered, resize
 * applied). See src/shared/stream-replay.ts.
 */
export interface AckMessage {
  type: "ack";
  seq: number;
}

/** exec.attach, agent → runtime, not numbered: the session is yours; `received` = last up frame it holds. */
export interface AttachedMessage {
  type: "attached";
  received: number;
}

/** exec (PTY), agent → runtime: whether the remote terminal shows the size of resize `id`. */
export interface ResizedMessage {
  type: "resized";
  id: number;
  ok: boolean;
}

/** exec, agent → runtime: the workload's real wait status; nothing follows. */
export interface ExitMessage {
  type: "exit";
  code: number | null;
  signal: string | null;
}

/** exec, runtime → agent: deliver a signal to the workload. */
export interface SignalMessage {
  type: "signal";
  signal: ExecSignal;
}

/** exec (PTY), runtime → agent: confirm the terminal shows this size, answering `resized`. */
export interface ResizeMessage {
  type: "resize";
  id: number;
  rows: number;
  cols: number;
}

export type ExecAgentMessage =
  PtyTokenMessage | StartedMessage | AckMessage | AttachedMessage | ResizedMessage | ExitMessage | ErrorMessage;
export type ExecRuntimeMessage = SignalMessage | AckMessage | ResizeMessage;

/** Every JSON frame an agent sends. */
export type AgentMessage =
  ResultMessage | ErrorMessage | NeedObjectsMessage | NeedLfsMessage | LfsPointersMessage | ProgressMessage | ExecAgentMessage;
/** Every JSON frame a runtime sends after its request. */
export type RuntimeMessage = AbortMessage | ExecRuntimeMessage;

// ---- guards ----------------------------------------------------------------------------------

const isErrorClass: Guard<ErrorClass> = (v): v is ErrorClass => typeof v === "string" && Object.hasOwn(EXIT_CODES, v);
const isStringMap = recordOf(isString);

const AGENT_MESSAGES: { [T in AgentMessage["type"]]: Guard<Extract<AgentMessage, { type: T }>> } = {
  result: object({ type: literal("result"), value: (_v): _v is unknown => true }),
  error: object({ type: literal("error"), errorClass: isErrorClass, message: isString }),
  "need-objects": object({
    type: literal("need-objects"),
    haves: arrayOf(isString),
    module: optional(isString),
    shallow: optional(arrayOf(isString)),
    disk: optional(object({ mount: isString, freeBytes: isNumber, freeFiles: nullable(isNumber), blockSize: isNumber })),
    agentMs: optional(isNumber),
  }),
  "need-lfs": object({ type: literal("need-lfs"), oids: arrayOf(isString) }),
  "lfs-pointers": object({ type: literal("lfs-pointers"), paths: arrayOf(isString), reason: isString }),
  progress: object({ type: literal("progress"), phase: literal("negotiate", "checkout") }),
  "pty-token": object({ type: literal("pty-token"), token: isString }),
  started: object({ type: literal("started"), pid: nullable(isInteger) }),
  ack: object({ type: literal("ack"), seq: isInteger }),
  attached: object({ type: literal("attached"), received: isInteger }),
  resized: object({ type: literal("resized"), id: isInteger, ok: isBoolean }),
  exit: object({ type: literal("exit"), code: nullable(isInteger), signal: nullable(isString) }),
};

const RUNTIME_MESSAGES: { [T in RuntimeMessage["type"]]: Guard<Extract<RuntimeMessage, { type: T }>> } = {
  abort: object({ type: literal("abort"), message: isString }),
  signal: object({ type: literal("signal"), signal: isExecSignal }),
  ack: object({ type: literal("ack"), seq: isInteger }),
  resize: object({ type: literal("resize"), id: isInteger, rows: isPositiveInt, cols: isPositiveInt }),
};

function decode<M extends { type: string }>(guards: Record<string, Guard<M>>, payload: Buffer | string): M | null {
  const value = parseJson(payload);
  if (!isRecord(value) || typeof value.type !== "string" || !Object.hasOwn(guards, value.type)) return null;
  const guard = guards[value.type]!;
  return guard(value) ? value : null;
}

/** An agent's JSON frame, or null when it is not one of the messages above. */
export function decodeAgentMessage(payload: Buffer | string): AgentMessage | null {
  return decode<AgentMessage>(AGENT_MESSAGES, payload);
}

/** A runtime's JSON frame after the request, or null when it is not one of the messages above. */
export function decodeRuntimeMessage(payload: Buffer | string): RuntimeMessage | null {
  const msg = decode<RuntimeMessage>(RUNTIME_MESSAGES, payload);
  // A peer's numbers are clamped to what the terminal can take.
  if (msg?.type === "resize") return { ...msg, rows: windowDimension(msg.rows), cols: windowDimension(msg.cols) };
  return msg;
}

const isWorkspaceView: Guard<WorkspaceView> = object({
  lifecycle: literal("ready", "paused"),
  cwd: isString,
  lifecycleEnvironment: isStringMap,
});

const isNull = literal(null);

/** What each one-shot op may answer; a runtime refuses any other value. */
export const ANSWERS: { [Op in OneShotOp]: Guard<AgentAnswer<Op>> } = {
  ping: object({ pong: literal(true) }),
  facts: object({
    os: isString,
    arch: isString,
    node: isString,
    nodePath: isString,
    git: nullable(isString),
    gitLfs: nullable(isString),
    root: isString,
    freeBytes: nullable(isNumber),
    terminal: object({ method: literal("python3", "script", "none"), detail: isString }),
  }),
  "pool.load": object({
    freeBytes: nullable(isNumber),
    blockSize: isNumber,
    memAvailableBytes: isNumber,
    loadPerCpu: isNumber,
    cpus: isInteger,
    liveExecs: isInteger,
    workspaces: isInteger,
    warmCache: isBoolean,
  }),
  "workspace.create": object({ view: isWorkspaceView, materializedFreshContent: isBoolean }),
  "workspace.inspect": oneOf(
    object({ status: literal("missing") }),
    object({ status: literal("error"), message: isString }),
    object({ status: literal("ready", "paused"), view: isWorkspaceView }),
  ),
  "workspace.pause": isNull,
  "workspace.resume": isWorkspaceView,
  "workspace.destroy": isNull,
  "workspace.release-backing": isNull,
  "workspace.reconcile": object({ removed: arrayOf(object({ workspaceId: isString, dir: isString })) }),
  "workspace.merge-info": object({
    head: isString,
    createdFrom: isString,
    integration: object({ localPath: isString, baseBranch: isString }),
  }),
  "workspace.adopt": isNull,
  "workspace.export-objects": object({ head: isString, bytes: isInteger }),
  "exec.signal": object({ state: isString }),
  "exec.processes": object({ processes: arrayOf(object({ pid: isInteger, state: isString, command: isString })) }),
  "exec.abandon": isNull,
};

/** True when `value` is what `op` answers. */
export function isAnswer<Op extends OneShotOp>(op: Op, value: unknown): value is AgentAnswer<Op> {
  return ANSWERS[op](value);
}
