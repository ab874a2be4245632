// Resolves a submodule URL from .gitmodules the way git does (remote.c relative_url, git 2.39):
// a URL starting with "./" or "../" is taken relative to the parent's remote URL, so a submodule's
// `origin` on the host is what a normal clone of the superproject would give it.

/** git's url_is_local_not_ssh: no colon, or a slash before the first colon (a path, not host:path). */
function isLocalNotSsh(url: string): boolean {
  const colon = url.indexOf(":");
  const slash = url.indexOf("/");
  return colon < 0 || (slash >= 0 && slash < colon);
}

const startsDot = (s: string) => s.startsWith("./");
const startsDotDot = (s: string) => s.startsWith("../");

export function isRelativeSubmoduleUrl(url: string): boolean {
  return startsDot(url) || startsDotDot(url);
}

/**
 * `url` resolved against `base` (the parent's remote URL, or the parent's directory when it has no
 * remote). Throws where git does: "../" beyond what a relative base can lose.
 */
export function resolveSubmoduleUrl(base: string, url: string): string {
  if (!isRelativeSubmoduleUrl(url)) return url;
  let remote = base.endsWith("/") ? base.slice(0, -1) : base;
  const isRelative = isLocalNotSsh(remote) && !remote.startsWith("/");
  if (isRelative && !startsDot(remote) && !startsDotDot(remote)) remote = `./${remote}`;
  let colonSep = false;
  let rest = url;
  for (;;) {
    if (startsDotDot(rest)) {
      rest = rest.slice(3);
      const slash = remote.lastIndexOf("/");
      const colon = remote.lastIndexOf(":");
      if (slash >= 0) remote = remote.slice(0, slash);
      else if (colon >= 0) {
        remote = remote.slice(0, colon);
        colonSep = true;
      } else if (isRelative || remote === ".") throw new Error(`cannot strip one component off url '${remote}'`);
      else remote = ".";
    } else if (startsDot(rest)) rest = rest.slice(2);
    else break;
  }
  let out = `${remote}${colonSep ? ":" : "/"}${rest}`;
  if (out.endsWith("/")) out = out.slice(0, -1);
  return startsDot(out) ? out.slice(2) : out;
}
