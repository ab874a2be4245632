// One host's effective ssh_config as the runtime uses it: the honoured keywords read from a Dump
// (ssh -G output or the fallback evaluator's equivalent) with the `%`/`~` expansion OpenSSH does
// at connect time, and a one-line refusal naming the keyword for what ssh2 cannot honour.
import { RuntimeError } from "../../shared/errors.js";
import { first, type Dump } from "./dump.js";
import { expandPath, expandTilde, expandTokens, defaultTokens, type LocalIdentity, type TokenContext } from "./tokens.js";

export type StrictHostKeyChecking = "yes" | "ask" | "accept-new" | "no";

export interface HostConfig {
  /** The name as given (an alias or a host name). */
  alias: string;
  hostname: string;
  port: number;
  user: string;
  /** Expanded, in order; missing files are skipped when connecting, as ssh does. */
  identityFiles: string[];
  identitiesOnly: boolean;
  /** A socket path, "none", or undefined for SSH_AUTH_SOCK. */
  identityAgent?: string;
  userKnownHostsFiles: string[];
  globalKnownHostsFiles: string[];
  hostKeyAlias?: string;
  strictHostKeyChecking: StrictHostKeyChecking;
  serverAliveIntervalS: number;
  serverAliveCountMax: number;
  connectTimeoutS?: number;
  proxyJump?: string;
  /** As written (tokens are expanded when it runs). */
  proxyCommand?: string;
}

function words(value: string | undefined): string[] {
  return value === undefined ? [] : value.split(/\s+/).filter((w) => w !== "");
}

function refuse(alias: string, keyword: string, why: string): never {
  throw new RuntimeError("input", `ssh_config for ${alias}: ${keyword} is not supported (${why})`);
}

/** The refusals, checked before any connection so the line names the keyword, not a symptom. */
function checkRefusals(alias: string, dump: Dump, identityFiles: string[], exists: (p: string) => boolean): void {
  if (dump.has("certificatefile")) refuse(alias, "CertificateFile", "ssh2 cannot authenticate with certificates");
  const cert = identityFiles.find((f) => exists(`${f}-cert.pub`));
  if (cert !== undefined) {
    refuse(alias, "IdentityFile", `${cert}-cert.pub lies beside the key and ssh2 cannot authenticate with certificates; use a plain key`);
  }
  if (first(dump, "pkcs11provider") !== undefined && first(dump, "pkcs11provider") !== "none") {
    refuse(alias, "PKCS11Provider", "keys on tokens are reachable only through ssh-agent: add them with ssh-add -s");
  }
  if (/^(yes|true)$/i.test(first(dump, "proxyusefdpass") ?? "no")) {
    refuse(alias, "ProxyUseFdpass", "the proxy command must relay the connection on its stdin/stdout");
  }
  if (/^(no|false)$/i.test(first(dump, "pubkeyauthentication") ?? "yes")) {
    refuse(alias, "PubkeyAuthentication no", "the runtime authenticates with keys only; keyboard-interactive and password need a prompt");
  }
  const preferred = first(dump, "preferredauthentications");
  if (preferred !== undefined && !preferred.split(",").includes("publickey")) {
    refuse(alias, `PreferredAuthentications ${preferred}`, "the runtime authenticates with keys only (publickey)");
  }
  const strict = first(dump, "stricthostkeychecking");
  if (strict === "false" || strict === "no" || strict === "off") {
    refuse(alias, "StrictHostKeyChecking no", "a daemon cannot ask and must not trust unknown keys; add the key to known_hosts");
  }
}

function strict(value: string | undefined): StrictHostKeyChecking {
  switch ((value ?? "ask").toLowerCase()) {
    case "true":
    case "yes":
      return "yes";
    case "accept-new":
      return "accept-new";
    case "false":
    case "no":
    case "off":
      return "no";
    default:
      return "ask";
  }
}

function positive(keyword: string, value: string | undefined, alias: string): number | undefined {
  if (value === undefined || value === "none") return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new RuntimeError("input", `ssh_config for ${alias}: ${keyword} "${value}" is not a number`);
  return n;
}

export function interpretDump(alias: string, dump: Dump, local: LocalIdentity, exists: (p: string) => boolean): HostConfig {
  const hostname = first(dump, "hostname") ?? alias;
  const user = first(dump, "user") ?? local.name;
  const port = positive("Port", first(dump, "port"), alias) ?? 22;
  const hostKeyAlias = first(dump, "hostkeyalias");
  const t: TokenContext = { alias, host: hostname, port, user, keyAlias: hostKeyAlias ?? alias };
  const paths = (keyword: string, list: string[]) => list.map((p) => expandPath(keyword, p, t, local));
  const identityFiles = paths("IdentityFile", dump.get("identityfile") ?? []);
  checkRefusals(alias, dump, identityFiles, exists);
  const agent = first(dump, "identityagent");
  const known = (keyword: string, key: string) => {
    const list = words(first(dump, key));
    return list.length === 1 && list[0]!.toLowerCase() === "none" ? [] : paths(keyword, list);
  };
  const proxyJump = first(dump, "proxyjump");
  const proxyCommand = first(dump, "proxycommand");
  return {
    alias,
    hostname,
    port,
    user,
    identityFiles,
    identitiesOnly: /^(yes|true)$/i.test(first(dump, "identitiesonly") ?? "no"),
    ...(agent !== undefined && agent !== "SSH_AUTH_SOCK"
      ? {
          identityAgent:
            agent === "none"
              ? "none"
              : expandTokens("IdentityAgent", expandTilde(agent, local), defaultTokens(t, local), { envVars: true }),
        }
      : {}),
    userKnownHostsFiles: known("UserKnownHostsFile", "userknownhostsfile"),
    globalKnownHostsFiles: known("GlobalKnownHostsFile", "globalknownhostsfile"),
    ...(hostKeyAlias !== undefined ? { hostKeyAlias } : {}),
    strictHostKeyChecking: strict(first(dump, "stricthostkeychecking")),
    serverAliveIntervalS: positive("ServerAliveInterval", first(dump, "serveraliveinterval"), alias) ?? 0,
    serverAliveCountMax: positive("ServerAliveCountMax", first(dump, "serveralivecountmax"), alias) ?? 3,
    ...(positive("ConnectTimeout", first(dump, "connecttimeout"), alias) !== undefined
      ? { connectTimeoutS: positive("ConnectTimeout", first(dump, "connecttimeout"), alias)! }
      : {}),
    ...(proxyJump !== undefined && proxyJump.toLowerCase() !== "none" ? { proxyJump } : {}),
    ...(proxyCommand !== undefined && proxyCommand.toLowerCase() !== "none" ? { proxyCommand } : {}),
  };
}
