// A git URL source the host can fetch: the fixture's bare repository copied onto the host (a
// container's file system in the compose rig) and owned by the remote user, since git refuses a
// repository another user owns. Removed with `remove()`.
import { execFileSync } from "node:child_process";
import { cpSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { gitSourceRepo } from "../fixtures/repo.js";
import { rig } from "../rig/rig.js";
import { onHost, requireView } from "./host-view.js";
import { suiteRoot } from "./workspace.js";

export function hostGitSource(base: string, label: string): ReturnType<typeof gitSourceRepo> & { remove(): void } {
  const made = gitSourceRepo(base);
  const bare = join(suiteRoot(label), "source.git");
  cpSync(made.bare, onHost(bare), { recursive: true });
  const { uid, gid } = requireView().idsOf(rig().user);
  execFileSync("chown", ["-R", `${uid}:${gid}`, onHost(dirname(bare))]);
  return { ...made, bare, url: `file://${bare}`, remove: () => rmSync(onHost(dirname(bare)), { recursive: true, force: true }) };
}
