// The common shape of the workspace CLI operations: read and validate the lifecycle request first
// (nothing touches the network before that), parse our options, connect, run, always close.
import type { Readable } from "node:stream";
import { parseRuntimeOptions, type RuntimeOptions } from "../transport/options.js";
import { readLifecycleRequest, type LifecycleInputOptions } from "./lifecycle-input.js";
import type { LifecycleRequest } from "../contract/schemas.js";
import { callWorkspaceOp as callOnHost, withHost } from "../workspace/host-call.js";
import type { CliOperation } from "./operation.js";
import { writeResponse } from "./respond.js";
import type { OperationResponse } from "../contract/index.js";

export { withHost };

export interface LifecycleContext {
  request: LifecycleRequest;
  options: RuntimeOptions;
}

export async function readWorkspaceRequest(
  stdin: Readable,
  operation: string,
  extra: Omit<LifecycleInputOptions, "operation">,
): Promise<LifecycleContext> {
  const request = await readLifecycleRequest(stdin, { operation, ...extra });
  return { request, options: parseRuntimeOptions(request.options) };
}

/** Connects, runs one `workspace.*` agent op as this request's runtime instance, closes. */
export function callWorkspaceOp<T>(
  ctx: LifecycleContext,
  op: string,
  workspaceId: string | null,
  extra: Record<string, unknown> = {},
): Promise<T> {
  return withHost(ctx.options, (host) => callOnHost<T>(host, op, ctx.request.runtimeInstanceId, workspaceId, extra));
}

/**
 * A `<operation> --workspace-id <id>` CLI operation that makes one agent call and answers with
 * `respond(workspaceId, result)`: inspect, pause, resume, destroy and release-backing differ only
 * in these two parts.
 */
export function workspaceOperation<T>(operation: string, respond: (workspaceId: string, result: T) => OperationResponse): CliOperation {
  return {
    requiredFlags: ["workspace-id"],
    async run(args, io) {
      const workspaceId = args.flags["workspace-id"]!;
      const ctx = await readWorkspaceRequest(io.stdin, operation, { workspaceId });
      const result = await callWorkspaceOp<T>(ctx, `workspace.${operation}`, workspaceId);
      await writeResponse(io.stdout, respond(workspaceId, result));
    },
  };
}

/** The `ok` answer of pause, destroy and release-backing. */
export const okResponse = (): OperationResponse => ({ type: "ok", protocolVersion: 1 });
