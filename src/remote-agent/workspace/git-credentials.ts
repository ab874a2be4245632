// Keeps credentials written into a git source URL (`https://user:TOKEN@host/repo`) off every
// command line on the host, where any local user can read them (`ps`, /proc/<pid>/cmdline). The
// URL git sees has no userinfo; the credentials reach git through a credential helper that reads
// them from the environment of that one git child (readable only by the same user), and only for
// the URL's own protocol and host. The helper list is reset for that child, so no configured
// helper (e.g. `store`) writes them to a file. Messages show the URL with `***` for userinfo.
import { RuntimeError } from "../../shared/errors.js";

interface ParsedUrl {
  scheme: string;
  userinfo: string | null;
  hostport: string;
  rest: string;
}

/** `scheme://[userinfo@]host[:port]rest`; null for scp-like and local paths (no credentials). */
function parse(url: string): ParsedUrl | null {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(.*)$/s.exec(url);
  if (!m) return null;
  const authority = m[2]!;
  const at = authority.lastIndexOf("@");
  return {
    scheme: m[1]!.toLowerCase(),
    userinfo: at < 0 ? null : authority.slice(0, at),
    hostport: authority.slice(at + 1),
    rest: m[3]!,
  };
}

const HTTP_LIKE = new Set(["http", "https", "ftp", "ftps"]);

function decode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** The URL with its userinfo (http-like) or password (ssh-like) replaced by `***`, for messages. */
export function redactUrl(url: string): string {
  const p = parse(url);
  if (!p || p.userinfo === null) return url;
  const colon = p.userinfo.indexOf(":");
  if (!HTTP_LIKE.has(p.scheme) && colon < 0) return url; // an ssh login name is no secret
  const shown = HTTP_LIKE.has(p.scheme) ? "***" : `${p.userinfo.slice(0, colon)}:***`;
  return `${p.scheme}://${shown}@${p.hostport}${p.rest}`;
}

/**
 * Git helper run by `sh`: answers `get` for the expected protocol and host only, from variables
 * of its own environment (names only here: this text is on sh's command line).
 */
const HELPER =
  '!f() { test "$1" = get || exit 0; h=; p=; while IFS= read -r l; do case "$l" in host=*) h=${l#host=};; protocol=*) p=${l#protocol=};; esac; done; ' +
  'test "$h" = "$PASEO_GIT_CRED_HOST" && test "$p" = "$PASEO_GIT_CRED_PROTOCOL" || exit 0; ' +
  'printf "username=%s\\npassword=%s\\n" "$PASEO_GIT_CRED_USERNAME" "$PASEO_GIT_CRED_PASSWORD"; }; f';

export interface GitSourceAccess {
  /** The URL to give git: no userinfo for http-like schemes, no password for the others. */
  url: string;
  /** Variables for the git child that talks to the source (empty without credentials). */
  env: Record<string, string>;
}

export function gitSourceAccess(url: string): GitSourceAccess {
  const p = parse(url);
  if (!p || p.userinfo === null) return { url, env: {} };
  const colon = p.userinfo.indexOf(":");
  if (!HTTP_LIKE.has(p.scheme)) {
    // ssh and friends take the login from the URL; a password there is never used, so drop it.
    return { url: colon < 0 ? url : `${p.scheme}://${p.userinfo.slice(0, colon)}@${p.hostport}${p.rest}`, env: {} };
  }
  const username = decode(colon < 0 ? p.userinfo : p.userinfo.slice(0, colon));
  const password = colon < 0 ? "" : decode(p.userinfo.slice(colon + 1));
  if (/[\n\r\0]/.test(username + password))
    throw new RuntimeError("input", `Git source URL credentials contain a line break: ${redactUrl(url)}`);
  return {
    url: `${p.scheme}://${p.hostport}${p.rest}`,
    env: {
      GIT_CONFIG_COUNT: "2",
      GIT_CONFIG_KEY_0: "credential.helper",
      GIT_CONFIG_VALUE_0: "",
      GIT_CONFIG_KEY_1: "credential.helper",
      GIT_CONFIG_VALUE_1: HELPER,
      PASEO_GIT_CRED_PROTOCOL: p.scheme,
      PASEO_GIT_CRED_HOST: p.hostport,
      PASEO_GIT_CRED_USERNAME: username,
      PASEO_GIT_CRED_PASSWORD: password,
    },
  };
}
