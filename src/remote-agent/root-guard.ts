// Holds on to the remote root this agent was started in. The bootstrap checked the root and every
// directory above it (OpenSSH's StrictModes rule) just before node ran, but the agent goes on
// naming paths under the root for as long as it lives: if a directory above the root became
// writable by someone else later, they could rename the root away and put their own in its place
// (workspaces/, run/ … linked back, agent/<hash>/helper.cjs their own). So the root and the agent's
// directory are remembered by device and inode when the agent starts, and every request first
// checks that both are still the same directories and that the directories above still pass.
import { lstatSync, realpathSync, type Stats } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname } from "node:path";
import { RuntimeError } from "../shared/errors.js";

export interface UnsafeParent {
  path: string;
  uid: number;
  mode: number;
}

/**
 * The nearest directory above `dir` that StrictModes would refuse (owned by neither root nor us, or
 * a directory group or others may write, unless it is root's and sticky like /tmp: nobody else can
 * rename or remove what we own there), walking up to the home directory or
 * `/`: first along the path as given (a symlink on it judged by its owner), then along its
 * canonical form. null when every one passes.
 */
export function unsafeParent(dir: string, home = homedir()): UnsafeParent | null {
  const me = process.getuid?.() ?? 0;
  let realHome = home;
  try {
    realHome = realpathSync(home);
  } catch {
    // No home: walk up to / instead.
  }
  for (const [start, stop] of [
    [dir, home],
    [realpathSync(dir), realHome],
  ] as const) {
    let path = start;
    while (path !== "/") {
      path = dirname(path);
      const st = lstatSync(path);
      const rootSticky = st.uid === 0 && (st.mode & 0o1000) !== 0;
      if ((st.uid !== 0 && st.uid !== me) || (st.isDirectory() && (st.mode & 0o022) !== 0 && !rootSticky))
        return { path, uid: st.uid, mode: st.mode };
      if (path === stop) break;
    }
  }
  return null;
}

const sameDir = (a: Stats, b: Stats) => a.dev === b.dev && a.ino === b.ino;

class RootGuard {
  private readonly held: Array<[string, Stats]>;

  constructor(
    readonly root: string,
    agentDir: string,
  ) {
    this.held = [root, agentDir].map((p) => [p, lstatSync(p)]);
    this.checkParents();
  }

  check(): void {
    for (const [path, st] of this.held) {
      let now: Stats | null = null;
      try {
        now = lstatSync(path);
      } catch {
        // Gone: as replaced.
      }
      if (!now || !sameDir(now, st)) {
        throw new RuntimeError(
          "ownership",
          `remote root ${this.root} was replaced after the host daemon verified it (${path} is not the directory it was): refusing to use it; make sure nobody else can write the directories above the root, then stop the daemon and run the operation again`,
        );
      }
    }
    this.checkParents();
  }

  private checkParents(): void {
    const bad = unsafeParent(this.root);
    if (!bad) return;
    throw new RuntimeError(
      "ownership",
      `directory ${bad.path} above the remote root ${this.root} is owned by uid ${bad.uid} with mode ${(bad.mode & 0o7777).toString(8)}; every directory above the root must belong to root or this user and not be writable by group or others: refusing to use the root`,
    );
  }
}

let guard: RootGuard | null = null;

/**
 * Remembers the root of the installed agent in `agentDir` (`<root>/agent/<16 hex>`), refusing one
 * whose parents are unsafe already. An agent run from elsewhere (a build directory, in tests)
 * has no installed root to hold.
 */
export function holdAgentRoot(agentDir: string): void {
  if (!/^[0-9a-f]{16}$/.test(basename(agentDir)) || basename(dirname(agentDir)) !== "agent") return;
  guard = new RootGuard(dirname(dirname(agentDir)), agentDir);
}

/**
 * Throws (ownership) unless the held root is still the directory verified at start, with safe
 * parents. Whatever root a request names: a daemon serves only its own, and a swapped root would
 * no longer resolve to the held one.
 */
export function checkAgentRoot(): void {
  guard?.check();
}
