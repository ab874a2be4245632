// The common shape of the workspace CLI operations: read and validate the lifecycle request first
// (nothing touches the network before that), parse our options, connect, run, always close.
import type { Readable } from "node:stream";
import { parseRuntimeOptions, type RuntimeOptions } from "../options.js";
import { readLifecycleRequest, type LifecycleInputOptions } from "../cli/lifecycle-input.js";
import type { LifecycleRequest } from "../contract/schemas.js";
import { callWorkspaceOp as callOnHost, withHost } from "./host-call.js";

export { withHost };

export interface LifecycleContext {
  request: LifecycleRequest;
  options: RuntimeOptions;
}

export async function readWorkspaceRequest(stdin: Readable, operation: string, extra: Omit<LifecycleInputOptions, "operation">): Promise<LifecycleContext> {
  const request = await readLifecycleRequest(stdin, { operation, ...extra });
  return { request, options: parseRuntimeOptions(request.options) };
}

/** Connects, runs one `workspace.*` agent op as this request's runtime instance, closes. */
export function callWorkspaceOp<T>(ctx: LifecycleContext, op: string, workspaceId: string | null, extra: Record<string, unknown> = {}): Promise<T> {
  return withHost(ctx.options, (host) => callOnHost<T>(host, op, ctx.request.runtimeInstanceId, workspaceId, extra));
}
