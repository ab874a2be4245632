// Gives a checkout the project's own remotes instead of the host cache it was cloned from. The
// cache stays what lends the objects (objects/info/alternates, written by `clone --shared`), never
// a remote: no `origin` pointing into the cache, none of its refs among the remote-tracking ones,
// so `git push origin` goes where it goes on the Paseo side, or fails with git's own message.
import { git } from "../../shared/git-exec.js";
import type { RemoteSpec, UpstreamSpec } from "../../shared/agent-api.js";

/** The remotes a checkout gets: a directory source's (as the Paseo side has them) or a git source's URL. */
export type RemotesPlan = { kind: "directory"; remotes: RemoteSpec[]; upstream: UpstreamSpec | null } | { kind: "git"; url: string };

/**
 * Replaces the cache `origin` a `clone --shared` left (its config, its remote-tracking refs, any
 * branch set to track it) with `plan`'s remotes; the checked-out `branch` tracks the upstream the
 * Paseo side's branch tracks. A git source keeps its remote-tracking refs (the URL's branches, as
 * fetched into the cache) with `origin` = the URL.
 */
export async function ownRemotes(checkout: string, branch: string, plan: RemotesPlan): Promise<void> {
  const cfg = (...args: string[]) => git(["config", ...args], { cwd: checkout });
  if (plan.kind === "git") {
    await cfg("remote.origin.url", plan.url);
    return;
  }
  await git(["remote", "remove", "origin"], { cwd: checkout, okCodes: [2] });
  for (const r of plan.remotes) {
    for (const url of r.urls) await cfg("--add", `remote.${r.name}.url`, url);
    for (const url of r.pushUrls) await cfg("--add", `remote.${r.name}.pushurl`, url);
    for (const spec of r.fetch) await cfg("--add", `remote.${r.name}.fetch`, spec);
  }
  const up = plan.upstream;
  if (!branch || !up) return;
  if (up.tracking) await git(["update-ref", up.tracking.ref, up.tracking.commit], { cwd: checkout });
  await cfg(`branch.${branch}.remote`, up.remote);
  await cfg(`branch.${branch}.merge`, up.merge);
}
