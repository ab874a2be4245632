// The environment a detached broker starts with. It outlives the operation that started it, so it
// must not carry that operation's environment (Paseo's, which may hold secrets) for hours: only
// what ssh-agent authentication and locating our own files need is passed on.
const KEPT = ["PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"] as const;

export function brokerEnvironment(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const name of KEPT) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}
