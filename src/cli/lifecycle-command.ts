// The common shape of the workspace CLI operations: read and validate the lifecycle request first
// (nothing touches the network before that), parse our options, connect, run, always close.
import type { Readable } from "node:stream";
import { parseRuntimeOptions, type RuntimeOptions } from "../transport/options.js";
import { readLifecycleRequest, type LifecycleInputOptions } from "./lifecycle-input.js";
import type { LifecycleRequest } from "../contract/schemas.js";
import { withHost } from "../broker/client/open-host.js";
import type { CliOperation, OperationIO } from "./operation.js";
import { writeResponse } from "./respond.js";
import type { OperationResponse } from "../contract/index.js";
import type { AgentAnswer, OneShotOp, OpRequest } from "../shared/agent-api.js";
import { isPoolOptions, onPoolHost } from "../workspace/pool/detect.js";
import type { RemoteHost } from "../transport/host.js";

export { withHost };

export interface LifecycleContext {
  request: LifecycleRequest;
  options: RuntimeOptions;
  /** The requesting runtime instance: the owner every workspace op is checked against. */
  owner: string;
  /** A pool's workspace: how messages name the host it lives on (absent for a single `host`). */
  hostLabel?: string;
}

export async function readWorkspaceRequest(
  stdin: Readable,
  operation: string,
  extra: Omit<LifecycleInputOptions, "operation">,
): Promise<LifecycleContext> {
  const request = await readLifecycleRequest(stdin, { operation, ...extra });
  const owner = request.runtimeInstanceId;
  if (isPoolOptions(request.options) && extra.workspaceId !== undefined) {
    // A pool's workspace operation goes straight to the workspace's own host (src/workspace/pool/).
    const { locateWorkspace } = await import("../workspace/pool/locate.js");
    const at = await locateWorkspace(request.options, owner, extra.workspaceId);
    return { request, options: at.options, owner, hostLabel: at.label };
  }
  return { request, options: parseRuntimeOptions(request.options), owner };
}

/**
 * Opens the workspace's host, runs `fn`, always closes. A pool's workspace has no other host to
 * go to: with its host down the operation fails fast, with a network error naming that host.
 */
export function withWorkspaceHost<T>(ctx: LifecycleContext, fn: (host: RemoteHost) => Promise<T>): Promise<T> {
  return onPoolHost(ctx.hostLabel, () => withHost(ctx.options, fn, { failFast: ctx.hostLabel !== undefined }));
}

/** Connects, runs one agent op, closes. */
export function callWorkspaceOp<Op extends OneShotOp>(
  ctx: LifecycleContext,
  op: Op,
  fields: OpRequest<Op>,
  timeoutMs?: number,
): Promise<AgentAnswer<Op>> {
  return withWorkspaceHost(ctx, (host) => host.call(op, fields, timeoutMs));
}

/** The agent ops a `<operation> --workspace-id <id>` command maps to one to one. */
type SimpleWorkspaceOp = "workspace.inspect" | "workspace.pause" | "workspace.resume";

/**
 * A `<operation> --workspace-id <id>` CLI operation: reads the request, runs `body` with the
 * workspace's context, writes what it answers.
 */
export function workspaceCommand(
  operation: string,
  body: (ctx: LifecycleContext, workspaceId: string, io: OperationIO) => Promise<OperationResponse>,
): CliOperation {
  return {
    requiredFlags: ["workspace-id"],
    async run(args, io) {
      const workspaceId = args.flags["workspace-id"]!;
      const ctx = await readWorkspaceRequest(io.stdin, operation, { workspaceId });
      await writeResponse(io.stdout, await body(ctx, workspaceId, io));
    },
  };
}

/**
 * One that makes one agent call and answers with `respond(workspaceId, result)`: inspect, pause
 * and resume differ only in these two parts (destroy and release-backing: removal-command.ts).
 */
export function workspaceOperation<Op extends SimpleWorkspaceOp>(
  op: Op,
  respond: (workspaceId: string, result: AgentAnswer<Op>) => OperationResponse,
): CliOperation {
  return workspaceCommand(op.slice("workspace.".length), async (ctx, workspaceId) =>
    respond(workspaceId, await callWorkspaceOp(ctx, op, { workspaceId, owner: ctx.owner })),
  );
}

/** The `ok` answer of pause, destroy and release-backing. */
export const okResponse = (): OperationResponse => ({ type: "ok", protocolVersion: 1 });
