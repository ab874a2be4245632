// One interface for the workspace suites to drive lifecycle operations and see what Paseo would
// see: success with the response value, or failure with the one-line message and exit code.
// sshDriver calls the operation modules' building blocks over the real sshd rig.
import { Writable } from "node:stream";
import { join } from "node:path";
import { EXIT_CODES, RuntimeError } from "../../src/errors.js";
import type { CreateInput, InspectionResponse, StateResponse } from "../../src/contract/schemas.js";
import { parseRuntimeOptions } from "../../src/options.js";
import { prepareCreate, runCreate, testHooksFromEnv } from "../../src/workspace/create-workspace.js";
import { createProgress } from "../../src/workspace/progress.js";
import { inspectionResponse, stateResponse } from "../../src/workspace/public-state.js";
import { callWorkspaceOp, withHost } from "../../src/workspace/host-call.js";
import type { InspectResult, ReconcileResult, WorkspaceView } from "../../src/workspace/agent-protocol.js";
import { rig, rigOptions } from "../rig/rig.js";
import { randomBytes } from "node:crypto";

export const OWNER = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
export const OTHER_OWNER = "f".repeat(64);

export interface Outcome<T = unknown> {
  ok: boolean;
  value: T | null;
  /** Failure message (what the CLI prints as its one stderr line). */
  message: string;
  exitCode: number;
  /** Everything written to stderr (progress lines, verbose reconcile lines). */
  stderr: string;
}

export interface CallOptions {
  owner?: string;
  env?: Record<string, string>;
  verbose?: boolean;
}

export type SimpleOp = "pause" | "resume" | "destroy" | "release-backing" | "merge-to-base";

export interface Driver {
  /** Remote root as an absolute path the test process can inspect directly. */
  root: string;
  create(input: CreateInput, o?: CallOptions): Promise<Outcome<StateResponse>>;
  inspect(workspaceId: string, o?: CallOptions): Promise<Outcome<InspectionResponse>>;
  op(name: SimpleOp, workspaceId: string, o?: CallOptions): Promise<Outcome>;
  reconcile(workspaceIds: string[], o?: CallOptions): Promise<Outcome>;
}

function sink(): { stream: Writable; text: () => string } {
  let text = "";
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      text += chunk.toString("utf8");
      cb();
    },
  });
  return { stream, text: () => text };
}

async function outcome<T>(stderr: () => string, fn: () => Promise<T>): Promise<Outcome<T>> {
  try {
    const value = await fn();
    return { ok: true, value, message: "", exitCode: 0, stderr: stderr() };
  } catch (err) {
    const e = err instanceof RuntimeError ? err : new RuntimeError("remote", String(err));
    return { ok: false, value: null, message: e.message, exitCode: EXIT_CODES[e.errorClass], stderr: stderr() + e.message + "\n" };
  }
}

/** Absolute path of a `~/…` rig root on the (local) remote host. */
export function absoluteRoot(root: string): string {
  const home = rig().remoteHome;
  if (!home) throw new Error("rig has no remote home");
  return root.startsWith("~/") ? join(home, root.slice(2)) : root;
}

const OK = { type: "ok", protocolVersion: 1 } as const;

/**
 * A fresh absolute root in /tmp for one suite: outside `~/.paseo-ssh-test*`, which every vitest
 * start wipes (a concurrent run by someone else would otherwise delete it mid-suite).
 */
export function suiteRoot(label: string): string {
  return `/tmp/paseo-ws-suite-${label}-${randomBytes(4).toString("hex")}`;
}

export function sshDriver(label = "ws"): Driver {
  const configured = suiteRoot(label);
  const options = parseRuntimeOptions(rigOptions({ root: configured }));
  const owner = (o?: CallOptions) => o?.owner ?? OWNER;
  return {
    root: absoluteRoot(configured),
    create(input, o) {
      const err = sink();
      return outcome(err.text, async () => {
        const env = { ...process.env, ...o?.env };
        const prepared = await prepareCreate(input, owner(o), testHooksFromEnv(env));
        const r = await withHost(options, (h) => runCreate(h, prepared, createProgress(err.stream, env)));
        return stateResponse(input.workspaceId, r.view, r.materializedFreshContent);
      });
    },
    inspect(id, o) {
      return outcome(() => "", async () =>
        inspectionResponse(id, await withHost(options, (h) => callWorkspaceOp<InspectResult>(h, "workspace.inspect", owner(o), id))),
      );
    },
    op(name, id, o) {
      return outcome(() => "", async () => {
        const v = await withHost(options, (h) => callWorkspaceOp<WorkspaceView | null>(h, `workspace.${name}`, owner(o), id));
        return name === "resume" ? stateResponse(id, v as WorkspaceView) : OK;
      });
    },
    reconcile(ids, o) {
      let lines = "";
      return outcome(() => lines, async () => {
        const r = await withHost(options, (h) => callWorkspaceOp<ReconcileResult>(h, "workspace.reconcile", owner(o), null, { workspaceIds: ids }));
        if (o?.verbose) for (const x of r.removed) lines += `reconcile: removed orphaned workspace ${JSON.stringify(x.workspaceId)} (${x.dir})\n`;
        return OK;
      });
    },
  };
}

/** A directory-source create input (placement `existing` unless given). */
export function dirInput(workspaceId: string, repo: string, placement: CreateInput["placement"] = { kind: "existing" }, extra: Partial<CreateInput> = {}): CreateInput {
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
