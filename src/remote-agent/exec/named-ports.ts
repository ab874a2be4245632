// The ports Paseo assigns a workload through its env (PASEO_PORT for a service script,
// PASEO_SERVICE_<NAME>_PORT for its peers, PASEO_WORKTREE_PORT): its service preview dials them on
// the Paseo side, so the port watch (port-watch.ts) forwards them first, looks for them more often
// until they listen, and forwards them even where `forwardPorts` lists other ports. Only the
// numbers are kept: the rest of the env never leaves the exec request.

const NAMED = /^PASEO_(PORT|WORKTREE_PORT|SERVICE_[A-Z0-9_]+_PORT)$/;

/** The valid port numbers among the env's PASEO_*PORT values (others are ignored, not refused). */
export function namedPorts(env: Record<string, string>): number[] {
  const out = new Set<number>();
  for (const [name, value] of Object.entries(env)) {
    if (!NAMED.test(name) || !/^[0-9]{1,5}$/.test(value)) continue;
    const port = Number(value);
    if (port >= 1 && port <= 65_535) out.add(port);
  }
  return [...out];
}
