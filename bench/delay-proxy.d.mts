// Types for delay-proxy.mjs, so TypeScript tests can put it between a client and sshd.
export interface DelayProxy {
  port: number;
  /** Number of open sockets (both sides of every proxied connection). */
  readonly connections: number;
  /** Closes every proxied connection (a dropped link; `reset` sends RST); the proxy keeps accepting new ones. */
  cutAll(opts?: { reset?: boolean }): void;
  /**
   * Starts an outage: nothing crosses in either direction and new connections get no answer.
   * Call the returned function to end it; held-back bytes and connections then proceed.
   */
  blackhole(): () => void;
  /**
   * Starts an outage of a host whose sshd is down: every connection is reset and the port stops
   * listening (new connections are refused). Call the returned function to listen again.
   */
  refuse(): () => void;
  close(): Promise<void>;
}

export function startDelayProxy(opts: {
  targetPort: number;
  targetHost?: "127.0.0.1";
  delayMs: number;
  listenPort?: number;
  maxLifetimeMs?: number;
  /** Every chunk passed on: direction ("up" = client to target), size, and when (epoch ms) it arrived and left. */
  onForward?: (e: { direction: "up" | "down"; bytes: number; receivedAt: number; sentAt: number }) => void;
}): Promise<DelayProxy>;
