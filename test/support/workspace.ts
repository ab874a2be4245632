// One interface for the workspace suites to drive lifecycle operations and see what Paseo would
// see: success with the response value, or failure with the one-line message and exit code.
// Every call runs the built CLI (run `npm run build` first) against the real sshd rig.
import { join } from "node:path";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import type { CreateInput, InspectionResponse, LifecycleRequest, Options, StateResponse } from "../../src/contract/schemas.js";
import { CLI_PATH, lifecycleRequest, runCli, TEST_RUNTIME_INSTANCE_ID } from "./run-cli.js";
import { rig, rigOptions } from "../rig/rig.js";
import { rmSync } from "node:fs";
import { hostView, onHost } from "./host-view.js";
import { randomBytes } from "node:crypto";

export const OWNER = TEST_RUNTIME_INSTANCE_ID;
export const OTHER_OWNER = "f".repeat(64);

export interface Outcome<T = unknown> {
  ok: boolean;
  value: T | null;
  /** Failure message (what the CLI prints as its one stderr line). */
  message: string;
  exitCode: number;
  /** Everything written to stderr (progress lines, verbose reconcile lines). */
  stderr: string;
  /** Raw stdout (exactly one canonical JSON line on success). */
  stdout: string;
}

export interface CallOptions {
  owner?: string;
  env?: Record<string, string>;
  verbose?: boolean;
}

export type SimpleOp = "pause" | "resume" | "destroy" | "release-backing" | "merge-to-base" | "work";

export interface Driver {
  /** Remote root as an absolute path the test process can inspect directly. */
  root: string;
  /** The runtime options every request carries (for tests that spawn the CLI themselves). */
  options: Options;
  create(input: CreateInput, o?: CallOptions): Promise<Outcome<StateResponse>>;
  inspect(workspaceId: string, o?: CallOptions): Promise<Outcome<InspectionResponse>>;
  op(name: SimpleOp, workspaceId: string, o?: CallOptions): Promise<Outcome>;
  reconcile(workspaceIds: string[], o?: CallOptions): Promise<Outcome>;
}

/** Absolute path of a `~/…` rig root on the (local) remote host. */
export function absoluteRoot(root: string): string {
  const home = rig().remoteHome;
  if (!home) throw new Error("rig has no remote home");
  return root.startsWith("~/") ? join(home, root.slice(2)) : root;
}

/**
 * A fresh root for one suite, given as an absolute path (no `~/`). In the login user's home, not
 * /tmp: a sticky world-writable parent fails the StrictModes check of the directories above a root
 * (only a host whose home the rig does not know gets /tmp). The run id in its name lets the rig
 * recognise the run's remote processes there (test/rig/run-processes.ts).
 */
export function suiteRoot(label: string, user = rig().user): string {
  // Another login user of the local rig (the noisy one) gets a root in their own home.
  const home = user === rig().user ? rig().remoteHome : execFileSync("getent", ["passwd", user]).toString().split(":")[5];
  return `${home ?? "/tmp"}/paseo-ws-suite-${rig().runId}-${label}-${randomBytes(4).toString("hex")}`;
}

/** Drives the built CLI (dist/cli.js) exactly as Paseo does, against the real sshd rig. */
export function cliDriver(label = "ws"): Driver {
  const configured = suiteRoot(label);
  const options = rigOptions({ root: configured }) as Options;
  const run = async <T>(args: string[], extra: Partial<LifecycleRequest>, o?: CallOptions): Promise<Outcome<T>> => {
    const stdin = lifecycleRequest(options, { ...(o?.owner ? { runtimeInstanceId: o.owner } : {}), ...extra });
    const r = await runCli([...(o?.verbose ? ["--verbose"] : []), ...args], {
      stdin,
      env: { ...process.env, ...o?.env },
      timeoutMs: 120_000,
    });
    const lines = r.stderr.trim().split("\n");
    const ok = r.code === 0;
    return {
      ok,
      value: ok ? (JSON.parse(r.stdout.toString("utf8")) as T) : null,
      message: ok ? "" : (lines[lines.length - 1] ?? ""),
      exitCode: r.code ?? -1,
      stderr: r.stderr,
      stdout: r.stdout.toString("utf8"),
    };
  };
  return {
    root: absoluteRoot(configured),
    options,
    create: (input, o) => run(["create", "--workspace-id", input.workspaceId], { input }, o),
    inspect: (id, o) => run(["inspect", "--workspace-id", id], {}, o),
    op: (name, id, o) => run([name, "--workspace-id", id], {}, o),
    reconcile: (ids, o) => run(["reconcile"], { workspaceIds: ids }, o),
  };
}

/** A directory-source create input (placement `existing` unless given). */
export function dirInput(
  workspaceId: string,
  repo: string,
  placement: CreateInput["placement"] = { kind: "existing" },
  extra: Partial<CreateInput> = {},
): CreateInput {
  return { workspaceId, project: { projectId: "fixture-project", source: { kind: "directory", path: repo } }, placement, ...extra };
}

/** Parses the PASEO_SSH_PROGRESS lines of a create's stderr. */
export function progressLines(stderr: string): Array<{ phase: string; bytes?: number; ms: number }> {
  return stderr
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { phase: string; bytes?: number; ms: number });
}

export function bytesSent(stderr: string): number {
  const line = progressLines(stderr).find((p) => p.phase === "objects-sent");
  if (!line || line.bytes === undefined) throw new Error(`no objects-sent progress line in: ${stderr}`);
  return line.bytes;
}

/**
 * Runs git in a remote checkout as the workspace's own (remote) user, the way workloads do, through
 * the host view (host-view.ts: setpriv only when that user is not us; docker exec on the container).
 */
export function gitAsRemoteUser(checkout: string, args: string[]): string {
  return hostView()!.run(rig().user, ["git", ...args], {
    cwd: checkout,
    env: {
      PATH: "/usr/local/bin:/usr/bin:/bin",
      HOME: "/tmp",
      GIT_AUTHOR_NAME: "Remote",
      GIT_AUTHOR_EMAIL: "remote@example.com",
      GIT_COMMITTER_NAME: "Remote",
      GIT_COMMITTER_EMAIL: "remote@example.com",
    },
  });
}

export interface RunningCli {
  child: ChildProcess;
  /** Resolves once stderr matches `pattern` (rejects after `ms`). */
  waitStderr(pattern: RegExp, ms?: number): Promise<void>;
  done: Promise<{ code: number | null; stderr: string }>;
}

/** Starts the built CLI without waiting for it, for tests that act while an operation runs. */
export function startCli(args: string[], stdin: string, env: Record<string, string> = {}): RunningCli {
  const child = spawn(process.execPath, [CLI_PATH, ...args], { env: { ...process.env, ...env }, stdio: ["pipe", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  child.stdin!.end(stdin);
  const done = new Promise<{ code: number | null; stderr: string }>((resolve) => child.once("close", (code) => resolve({ code, stderr })));
  const waitStderr = async (pattern: RegExp, ms = 20_000) => {
    const deadline = Date.now() + ms;
    while (!pattern.test(stderr)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`stderr never matched ${pattern}: ${stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return { child, waitStderr, done };
}

/**
 * Removes a suite's remote root at the end. The host daemon may still be writing a spare checkout
 * there in the background (its rename into place races the walk: ENOTEMPTY), so the removal is
 * retried for a few seconds instead of failing the suite.
 */
export function removeRoot(root: string): void {
  rmSync(onHost(root), { recursive: true, force: true, maxRetries: 50, retryDelay: 100 });
}
