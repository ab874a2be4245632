// Whether an options object is a pool (`hosts` / `hostsCommand`), and the wrapper naming a pool host
// in a network failure: the only pool code the single-host path runs, so it loads nothing else.
import { RuntimeError } from "../../shared/errors.js";

export function isPoolOptions(raw: unknown): raw is Record<string, unknown> {
  return typeof raw === "object" && raw !== null && !Array.isArray(raw) && ("hosts" in raw || "hostsCommand" in raw);
}

/** Network failures whose message already names their pool host (known by identity, never by text). */
const namingTheirHost = new WeakSet<RuntimeError>();

/** Marks a network failure whose message names its pool host, so that onPoolHost adds nothing. */
export function namesItsHost(err: RuntimeError): RuntimeError {
  namingTheirHost.add(err);
  return err;
}

/** Prefixes a network failure with the pool host it happened on (unless it already names it). */
export async function onPoolHost<T>(label: string | undefined, fn: () => Promise<T>): Promise<T> {
  if (label === undefined) return fn();
  try {
    return await fn();
  } catch (err) {
    if (err instanceof RuntimeError && err.errorClass === "network" && !namingTheirHost.has(err)) {
      throw namesItsHost(new RuntimeError("network", `${label}: ${err.message}`, { cause: err }));
    }
    throw err;
  }
}
