// Turns low-level socket and ssh2 failures into classified RuntimeErrors that name host:port, so
// a user sees "network" vs "auth" vs "host-key" and a stable exit code instead of a raw errno.
import { RuntimeError, oneLine } from "../shared/errors.js";

const NETWORK_CODES: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ETIMEDOUT: "connection timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ENOTFOUND: "host name not found",
  EAI_AGAIN: "host name lookup failed temporarily",
  ECONNRESET: "connection reset by peer",
  EPIPE: "connection closed by peer",
};

export function networkError(target: string, err: unknown): RuntimeError {
  if (err instanceof RuntimeError) return err;
  const e = err as NodeJS.ErrnoException & { level?: string };
  const what = (e.code && NETWORK_CODES[e.code]) ?? oneLine(e.message ?? String(err));
  return new RuntimeError("network", `Cannot reach SSH server ${target}: ${what}${e.code ? ` (${e.code})` : ""}`, { cause: err });
}

/** Classifies an error emitted by ssh2's Client during connect/handshake/auth. */
export function classifySshError(target: string, err: unknown): RuntimeError {
  if (err instanceof RuntimeError) return err;
  const e = err as Error & { level?: string; code?: string };
  if (e.level === "client-timeout") {
    return new RuntimeError("network", `SSH handshake with ${target} timed out`, { cause: err });
  }
  if (e.level === "client-socket" || e.level === "client-dns" || e.code) return networkError(target, err);
  if (e.level === "protocol" || e.level === "handshake") {
    return new RuntimeError("network", `SSH handshake with ${target} failed: ${oneLine(e.message)}`, { cause: err });
  }
  return new RuntimeError("network", `SSH connection to ${target} failed: ${oneLine(e.message ?? String(err))}`, { cause: err });
}
