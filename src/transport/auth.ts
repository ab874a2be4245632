// Which public-key credentials a connection may use: the hop's identity files (option, ssh_config
// or ssh's defaults) and/or its ssh-agent (IdentityAgent or SSH_AUTH_SOCK), tried in that order.
// There is no prompt, so an encrypted key is only usable through ssh-agent; we never read
// passphrases from the environment.
import { existsSync, readFileSync } from "node:fs";
import ssh2 from "ssh2";
import type { AnyAuthMethod, AuthenticationType, AuthHandlerMiddleware, ParsedKey } from "ssh2";

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
function loadIdentity(file: string): { key?: ParsedKey; problem?: string; encrypted?: boolean } {
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
        encrypted: true,
        problem: `identity file ${file} is encrypted and there is no passphrase prompt; load it into ssh-agent (ssh-add ${file}) and make SSH_AUTH_SOCK available to the runtime`,
      };
    }
    return { problem: `cannot parse identity file ${file} (${parsed.message})` };
  }
  const key = Array.isArray(parsed) ? (parsed[0] as ParsedKey) : parsed;
  if (!key.isPrivateKey()) return { problem: `identity file ${file} holds no private key` };
  return { key };
}

/** The public key blob of an identity (from the key, or `<file>.pub` for an encrypted key). */
function publicBlob(file: string, key: ParsedKey | undefined): Buffer | undefined {
  if (key) return key.getPublicSSH();
  try {
    const pub = ssh2.utils.parseKey(readFileSync(`${file}.pub`));
    if (pub instanceof Error) return undefined;
    return (Array.isArray(pub) ? (pub[0] as ParsedKey) : pub).getPublicSSH();
  } catch {
    return undefined;
  }
}

/**
 * ssh-agent offering only the listed keys: IdentitiesOnly keeps an agent's other keys out of the
 * server's MaxAuthTries, and lets a key that is listed but encrypted on disk sign through the agent.
 */
class ListedKeysAgent extends ssh2.OpenSSHAgent {
  constructor(
    socket: string,
    private readonly allowed: Buffer[],
  ) {
    super(socket);
  }
  override getIdentities(cb: Parameters<InstanceType<typeof ssh2.OpenSSHAgent>["getIdentities"]>[0]): void {
    super.getIdentities((err, keys) => {
      if (err || !keys) return cb(err, keys);
      cb(
        undefined,
        keys.filter((k) => "getPublicSSH" in k && this.allowed.some((b) => b.equals(k.getPublicSSH()))),
      );
    });
  }
}

/** Who to authenticate as and with what: one hop of the connection chain. */
export interface AuthTarget {
  user: string;
  identityFiles: string[];
  /** A missing file is a problem only when the user named it (option), not a default or config entry. */
  identityFromOption: boolean;
  identitiesOnly: boolean;
  agentSocket: string | null;
}

export function planAuth(target: AuthTarget): AuthPlan {
  const username = target.user;
  const methods: Array<{ label: string; method: AnyAuthMethod }> = [];
  const unusable: string[] = [];
  const listed: Buffer[] = [];
  for (const file of target.identityFiles) {
    if (!target.identityFromOption && !existsSync(file)) continue;
    const id = loadIdentity(file);
    if (id.key) methods.push({ label: `publickey via ${file}`, method: { type: "publickey", username, key: id.key } });
    // An encrypted key may still sign through ssh-agent, so that note is only kept without one.
    if (id.problem && !(target.agentSocket && id.encrypted)) unusable.push(id.problem);
    const blob = publicBlob(file, id.key);
    if (blob) listed.push(blob);
  }
  const agentSocket = target.agentSocket;
  if (agentSocket) {
    const agent = target.identitiesOnly ? new ListedKeysAgent(agentSocket, listed) : agentSocket;
    const only = target.identitiesOnly ? ", IdentitiesOnly: listed keys only" : "";
    methods.push({ label: `publickey via ssh-agent (${agentSocket}${only})`, method: { type: "agent", username, agent } });
  }
  if (methods.length === 0 && unusable.length === 0) {
    unusable.push(
      target.identityFiles.length > 0
        ? `none of the identity files exists (${target.identityFiles.join(", ")}) and there is no ssh-agent (SSH_AUTH_SOCK is not set)`
        : "no identityFile option and no ssh-agent (SSH_AUTH_SOCK is not set)",
    );
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
