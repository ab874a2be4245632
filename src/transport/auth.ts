// Which public-key credentials a connection may use: the configured identity file and/or the
// user's ssh-agent (SSH_AUTH_SOCK), tried in that order. There is no prompt, so an encrypted key
// is only usable through ssh-agent; we never read passphrases from the environment.
import { readFileSync } from "node:fs";
import ssh2 from "ssh2";
import type { AnyAuthMethod, AuthenticationType, AuthHandlerMiddleware, ParsedKey } from "ssh2";
import type { RuntimeOptions } from "../options.js";

export interface AuthPlan {
  handler: AuthHandlerMiddleware;
  /** Human-readable list of what was (to be) tried, for the failure message. */
  tried: string[];
  /** Method that was in flight when the server accepted, once known. */
  current(): string | undefined;
  /** Why no method could be offered at all (e.g. only an encrypted key and no agent). */
  unusable: string[];
}

/**
 * Problems are returned, not thrown: they are reported as part of the authentication failure, so
 * the host key is still verified first and an ssh-agent key can still succeed.
 */
function loadIdentity(file: string): { key?: ParsedKey; problem?: string } {
  let data: Buffer;
  try {
    data = readFileSync(file);
  } catch (err) {
    return { problem: `cannot read identity file ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` };
  }
  const parsed = ssh2.utils.parseKey(data);
  if (parsed instanceof Error) {
    if (/encrypted/i.test(parsed.message) || /passphrase/i.test(parsed.message)) {
      return {
        problem: `identity file ${file} is encrypted and there is no passphrase prompt; load it into ssh-agent (ssh-add ${file}) and make SSH_AUTH_SOCK available to the runtime`,
      };
    }
    return { problem: `cannot parse identity file ${file} (${parsed.message})` };
  }
  const key = Array.isArray(parsed) ? (parsed[0] as ParsedKey) : parsed;
  if (!key.isPrivateKey()) return { problem: `identity file ${file} holds no private key` };
  return { key };
}

export function planAuth(options: RuntimeOptions, agentSocket = process.env.SSH_AUTH_SOCK): AuthPlan {
  const username = options.user;
  const methods: Array<{ label: string; method: AnyAuthMethod }> = [];
  const unusable: string[] = [];
  if (options.identityFile) {
    const id = loadIdentity(options.identityFile);
    if (id.key) methods.push({ label: `publickey via ${options.identityFile}`, method: { type: "publickey", username, key: id.key } });
    if (id.problem) unusable.push(id.problem);
  }
  if (agentSocket) {
    methods.push({ label: `publickey via ssh-agent (${agentSocket})`, method: { type: "agent", username, agent: agentSocket } });
  }
  if (!options.identityFile && !agentSocket) {
    unusable.push("no identityFile option and no ssh-agent (SSH_AUTH_SOCK is not set)");
  }
  const tried: string[] = [];
  let index = 0;
  const handler: AuthHandlerMiddleware = (_left, _partial, next) => {
    const m = methods[index++];
    // ssh2 accepts `false` here to stop (its typings omit it).
    if (!m) return next(false as unknown as AuthenticationType);
    tried.push(m.label);
    next(m.method);
  };
  return { handler, tried, unusable, current: () => tried[tried.length - 1] };
}
