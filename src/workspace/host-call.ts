// Connecting for one workspace operation: open the host from parsed options, run, always close;
// and the common one-shot agent call addressed by workspace id and owner.
import type { RuntimeOptions } from "../transport/options.js";
import { openHost } from "../broker/open-host.js";
import type { RemoteHost } from "../transport/host.js";

export async function withHost<T>(options: RuntimeOptions, fn: (host: RemoteHost) => Promise<T>): Promise<T> {
  const host = await openHost(options);
  try {
    return await fn(host);
  } finally {
    host.close();
  }
}

/** One request/response agent op (`workspace.*`) on the host. */
export function callWorkspaceOp<T>(
  host: RemoteHost,
  op: string,
  owner: string,
  workspaceId: string | null,
  extra: Record<string, unknown> = {},
): Promise<T> {
  return host.call<T>({ op, root: host.root, ...(workspaceId === null ? {} : { workspaceId }), owner, ...extra });
}
