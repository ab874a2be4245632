// OpenSSH's `%` tokens, `${VAR}` and `~` in ssh_config values. `ssh -G` leaves IdentityFile,
// CertificateFile, GlobalKnownHostsFile and ProxyCommand unexpanded (ssh expands them only when it
// connects), and the fallback evaluator expands nothing, so both paths finish the job here with
// the token sets OpenSSH uses for each keyword.
import { readFileSync } from "node:fs";
import { hostname, userInfo } from "node:os";
import { RuntimeError } from "../../shared/errors.js";

/** What the tokens of one connection stand for. */
export interface TokenContext {
  /** %n: the host name as given (alias). */
  alias: string;
  /** %h: the remote host name after HostName. */
  host: string;
  /** %p */
  port: number;
  /** %r: the remote user. */
  user: string;
  /** %k: HostKeyAlias or the alias. */
  keyAlias: string;
  /** %j: the ProxyJump value, or "". */
  jump?: string;
}

export interface LocalIdentity {
  /** %u */
  name: string;
  /** %d, and what `~` means: the password-database home, as OpenSSH uses. */
  home: string;
  /** %i */
  uid: number;
  /** %l: this host's name. */
  thisHost: string;
}

export function localIdentity(): LocalIdentity {
  const info = userInfo();
  return { name: info.username, home: info.homedir, uid: info.uid, thisHost: hostname() };
}

/**
 * %C: sha1(%l%h%p%r) in hex, as OpenSSH computes its connection hash. node:crypto is loaded only
 * here: few configurations use %C, and loading it is a measurable part of every process's start.
 * (The built bundles are CommonJS and have require; the sources run where getBuiltinModule exists.)
 */
function connectionHash(local: LocalIdentity, t: TokenContext): string {
  const { createHash } = process.getBuiltinModule?.("node:crypto") ?? (require("node:crypto") as typeof import("node:crypto"));
  return createHash("sha1").update(`${local.thisHost}${t.host}${t.port}${t.user}`).digest("hex");
}

/** The tokens most keywords accept (OpenSSH's DEFAULT_CLIENT_PERCENT_EXPAND_ARGS). */
export function defaultTokens(t: TokenContext, local: LocalIdentity): Record<string, string> {
  return {
    // Computed when a value names %C.
    get C() {
      return connectionHash(local, t);
    },
    L: local.thisHost.split(".")[0]!,
    i: String(local.uid),
    k: t.keyAlias,
    l: local.thisHost,
    n: t.alias,
    p: String(t.port),
    d: local.home,
    h: t.host,
    r: t.user,
    u: local.name,
    ...(t.jump !== undefined ? { j: t.jump } : {}),
  };
}

/** ProxyCommand's narrower set (OpenSSH expand_proxy_command). */
export function proxyCommandTokens(t: TokenContext): Record<string, string> {
  return { h: t.host, k: t.keyAlias, n: t.alias, p: String(t.port), r: t.user };
}

/**
 * `%x` tokens from `tokens` (`%%` is a literal %) and, with `envVars`, `${VAR}` from the
 * environment. An unknown token or unset variable is an error naming the keyword, as in ssh.
 */
export function expandTokens(keyword: string, value: string, tokens: Record<string, string>, { envVars }: { envVars: boolean }): string {
  let out = "";
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!;
    if (envVars && c === "$" && value[i + 1] === "{") {
      const end = value.indexOf("}", i + 2);
      if (end < 0) throw new RuntimeError("input", `ssh_config ${keyword} "${value}": environment variable is missing its closing "}"`);
      const name = value.slice(i + 2, end);
      const v = process.env[name];
      if (name === "" || v === undefined)
        throw new RuntimeError("input", `ssh_config ${keyword} "${value}": environment variable ${name} has no value`);
      out += v;
      i = end;
      continue;
    }
    if (c !== "%") {
      out += c;
      continue;
    }
    const key = value[++i];
    if (key === "%") out += "%";
    else if (key !== undefined && Object.hasOwn(tokens, key)) out += tokens[key];
    else throw new RuntimeError("input", `ssh_config ${keyword} "${value}": unknown token %${key ?? ""}`);
  }
  return out;
}

/** OpenSSH's tilde_expand_filename: `~` and `~/…` against the user's home, `~user/…` against theirs. */
export function expandTilde(path: string, local: LocalIdentity, homeOf: (user: string) => string | undefined = passwdHome): string {
  if (!path.startsWith("~")) return path;
  const slash = path.indexOf("/");
  const who = path.slice(1, slash < 0 ? undefined : slash);
  const home = who === "" ? local.home : homeOf(who);
  if (home === undefined) throw new RuntimeError("input", `ssh_config path ${path}: no such user ${who}`);
  if (slash < 0) return home;
  return `${home.replace(/\/$/, "")}${path.slice(slash)}`;
}

function passwdHome(user: string): string | undefined {
  try {
    const line = readFileSync("/etc/passwd", "utf8")
      .split("\n")
      .find((l) => l.split(":")[0] === user);
    return line?.split(":")[5];
  } catch {
    return undefined;
  }
}

/** A path keyword as OpenSSH finishes it: `~` first, then tokens and `${VAR}`. */
export function expandPath(keyword: string, value: string, t: TokenContext, local: LocalIdentity): string {
  return expandTokens(keyword, expandTilde(value, local), defaultTokens(t, local), { envVars: true });
}
