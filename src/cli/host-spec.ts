// `--host [user@]host[:port]` as `config` and `demo` take it, turned into runtime option keys.
import { RuntimeError } from "../shared/errors.js";

export interface HostSpec {
  user?: string;
  host: string;
  port?: number;
}

/** `[user@]host[:port]`, with `[addr]` for IPv6 literals. */
export function parseHostSpec(spec: string): HostSpec {
  const match = /^(?:([^@\s]+)@)?(\[[^\]\s]+\]|[^:@\s[\]]+)(?::(\d{1,5}))?$/.exec(spec);
  if (!match) {
    throw new RuntimeError("input", `Invalid --host "${spec}": expected [user@]host[:port] (IPv6 as [addr]:port)`);
  }
  const [, user, host, port] = match;
  return {
    ...(user !== undefined ? { user } : {}),
    host: host!.replace(/^\[(.*)\]$/, "$1"),
    ...(port !== undefined ? { port: Number(port) } : {}),
  };
}

/** Runtime option keys for a host spec, in the order the docs list them. */
export function hostOptions(spec: HostSpec): Record<string, string | number> {
  return {
    host: spec.host,
    ...(spec.port !== undefined ? { port: spec.port } : {}),
    ...(spec.user !== undefined ? { user: spec.user } : {}),
  };
}
