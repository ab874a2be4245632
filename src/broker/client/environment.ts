// The environment a detached broker starts with. It outlives the operation that started it, so it
// must not carry that operation's environment (Paseo's, which may hold secrets) for hours: only
// what ssh-agent authentication and locating our own files need is passed on. A ProxyCommand is
// the exception OpenSSH makes too: it runs in the user's environment (it may need credentials of
// its own), so when the plan has one, that environment travels to the broker on stdin and is given
// to the ProxyCommand alone, never to the broker process itself.
import type { ConnectionPlan } from "../../transport/ssh-config/resolve.js";

const KEPT = ["PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"] as const;

export function brokerEnvironment(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const name of KEPT) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/** The environment for the plan's ProxyCommand, or undefined when it has none. */
export function proxyEnvironment(plan: ConnectionPlan | undefined, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv | undefined {
  return plan?.hops.some((h) => h.proxyCommand !== undefined) ? { ...env } : undefined;
}
