// Types for delay-proxy.mjs, so TypeScript tests (test/broker) can put it between a client and sshd.
export interface DelayProxy {
  port: number;
  /** Number of open sockets (both sides of every proxied connection). */
  readonly connections: number;
  /** Destroys every proxied connection (a dropped link); the proxy keeps accepting new ones. */
  cutAll(): void;
  close(): Promise<void>;
}

export function startDelayProxy(opts: {
  targetPort: number;
  targetHost?: "127.0.0.1";
  delayMs: number;
  listenPort?: number;
  maxLifetimeMs?: number;
}): Promise<DelayProxy>;
