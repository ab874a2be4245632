// The common shape of the workspace CLI operations: read and validate the lifecycle request first
// (nothing touches the network before that), parse our options, connect, run, always close.
import type { Readable } from "node:stream";
import { parseRuntimeOptions, type RuntimeOptions } from "../transport/options.js";
import { readLifecycleRequest, type LifecycleInputOptions } from "./lifecycle-input.js";
import type { LifecycleRequest } from "../contract/schemas.js";
import { withHost } from "../broker/open-host.js";
import type { CliOperation } from "./operation.js";
import { writeResponse } from "./respond.js";
import type { OperationResponse } from "../contract/index.js";
import type { AgentAnswer, OneShotOp, OpRequest } from "../shared/agent-api.js";

export { withHost };

export interface LifecycleContext {
  request: LifecycleRequest;
  options: RuntimeOptions;
  /** The requesting runtime instance: the owner every workspace op is checked against. */
  owner: string;
}

export async function readWorkspaceRequest(
  stdin: Readable,
  operation: string,
  extra: Omit<LifecycleInputOptions, "operation">,
): Promise<LifecycleContext> {
  const request = await readLifecycleRequest(stdin, { operation, ...extra });
  return { request, options: parseRuntimeOptions(request.options), owner: request.runtimeInstanceId };
}

/** Connects, runs one agent op, closes. */
export function callWorkspaceOp<Op extends OneShotOp>(
  ctx: LifecycleContext,
  op: Op,
  fields: OpRequest<Op>,
  timeoutMs?: number,
): Promise<AgentAnswer<Op>> {
  return withHost(ctx.options, (host) => host.call(op, fields, timeoutMs));
}

/** The agent ops a `<operation> --workspace-id <id>` command maps to one to one. */
type SimpleWorkspaceOp = "workspace.inspect" | "workspace.pause" | "workspace.resume" | "workspace.destroy" | "workspace.release-backing";

/**
 * A `<operation> --workspace-id <id>` CLI operation that makes one agent call and answers with
 * `respond(workspaceId, result)`: inspect, pause, resume, destroy and release-backing differ only
 * in these two parts.
 */
export function workspaceOperation<Op extends SimpleWorkspaceOp>(
  op: Op,
  respond: (workspaceId: string, result: AgentAnswer<Op>) => OperationResponse,
): CliOperation {
  const operation = op.slice("workspace.".length);
  return {
    requiredFlags: ["workspace-id"],
    async run(args, io) {
      const workspaceId = args.flags["workspace-id"]!;
      const ctx = await readWorkspaceRequest(io.stdin, operation, { workspaceId });
      const result = await callWorkspaceOp(ctx, op, { workspaceId, owner: ctx.owner });
      await writeResponse(io.stdout, respond(workspaceId, result));
    },
  };
}

/** The `ok` answer of pause, destroy and release-backing. */
export const okResponse = (): OperationResponse => ({ type: "ok", protocolVersion: 1 });
