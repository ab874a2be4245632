// The project's own remotes, read on the Paseo host, so the workspace's `git remote -v` is the
// local repository's (not the host's object cache) and its branch tracks what it tracks here.
// Read-only git only. Credentials written into an http(s) URL are dropped: they never reach the host.
import { gitResult, SHA_RE } from "../shared/git-exec.js";
import type { RemoteSpec, UpstreamSpec } from "../shared/agent-api.js";
import { isRemoteName, isRemoteValue } from "../shared/agent-api.js";

/** Which local branch's upstream the workspace's branch copies, or the remote branch it starts from. */
export type TrackFrom = { kind: "local"; branch: string } | { kind: "remote"; remote: string; branch: string } | null;

async function localGit(repo: string, args: string[]): Promise<string> {
  const r = await gitResult(args, { cwd: repo, errorClass: "input", okCodes: [1, 2, 128], timeoutMs: 60_000 });
  return r.code === 0 ? r.stdout : "";
}

const lines = (s: string) => s.split("\n").filter((l) => l !== "");

/** Drops user info (a token or password) from an http(s) URL: credentials never travel to the host. */
export function withoutCredentials(url: string): string | null {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    return u.toString();
  } catch {
    return null;
  }
}

/** An http(s) URL loses its user info; anything else (an ssh login name is no secret) stays as written. */
function withoutUserInfo(url: string): string {
  return /^https?:\/\/[^/]*@/i.test(url) ? (withoutCredentials(url) ?? url) : url;
}

/**
 * Every remote as `git remote -v` shows it: fetch URLs with url.<base>.insteadOf applied, and push
 * URLs only where they differ (a pushurl, or pushInsteadOf), plus its fetch refspecs.
 */
export async function localRemotes(repo: string): Promise<RemoteSpec[]> {
  const names = lines(await localGit(repo, ["remote"])).filter(isRemoteName);
  const remotes = await Promise.all(
    names.map(async (name): Promise<RemoteSpec | null> => {
      const [urls, pushUrls, fetch] = await Promise.all([
        localGit(repo, ["remote", "get-url", "--all", name]),
        localGit(repo, ["remote", "get-url", "--push", "--all", name]),
        localGit(repo, ["config", "--get-all", `remote.${name}.fetch`]),
      ]);
      const spec = {
        name,
        urls: lines(urls).map(withoutUserInfo),
        pushUrls: lines(pushUrls).map(withoutUserInfo),
        fetch: lines(fetch),
      };
      if (spec.pushUrls.join("\n") === spec.urls.join("\n")) spec.pushUrls = [];
      return [...spec.urls, ...spec.pushUrls, ...spec.fetch].every(isRemoteValue) && spec.urls.length > 0 ? spec : null;
    }),
  );
  return remotes.filter((r): r is RemoteSpec => r !== null);
}

/**
 * What the workspace's branch tracks: the local branch's own upstream (when it is one of `remotes`),
 * or, for a branch made from a remote-tracking ref (`git switch <name>` of origin/<name>), that one.
 * The remote-tracking ref's commit rides along, so `git status` compares as it does here.
 */
export async function localUpstream(repo: string, from: TrackFrom, remotes: RemoteSpec[]): Promise<UpstreamSpec | null> {
  if (!from) return null;
  let remote: string;
  let merge: string;
  if (from.kind === "local") {
    remote = (await localGit(repo, ["config", "--get", `branch.${from.branch}.remote`])).trim();
    merge = (await localGit(repo, ["config", "--get", `branch.${from.branch}.merge`])).trim();
  } else {
    remote = from.remote;
    merge = `refs/heads/${from.branch}`;
  }
  if (!remotes.some((r) => r.name === remote) || !merge.startsWith("refs/heads/") || !isRemoteValue(merge)) return null;
  // Where the remote's refspec puts that branch (refs/remotes/<remote>/<branch> by default).
  const tracking =
    from.kind === "local"
      ? (await localGit(repo, ["for-each-ref", "--format=%(upstream)", `refs/heads/${from.branch}`])).trim()
      : `refs/remotes/${remote}/${from.branch}`;
  const commit = tracking ? (await localGit(repo, ["rev-parse", "--verify", "--quiet", `${tracking}^{commit}`])).trim() : "";
  const known = tracking.startsWith("refs/remotes/") && isRemoteValue(tracking) && SHA_RE.test(commit);
  return { remote, merge, ...(known ? { tracking: { ref: tracking, commit } } : {}) };
}
