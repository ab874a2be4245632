// Turns a cached commit into the workspace's checkout: a real repository on the requested branch
// (or detached), sharing the cache's objects through alternates, with the project's own remotes
// (remotes.ts). Also canonicalises the workspace root and refuses symlink escapes.
import { mkdirSync, realpathSync, renameSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { RuntimeError } from "../../shared/errors.js";
import { git, gitResult } from "../../shared/git-exec.js";
import { CWD_ESCAPE_MESSAGE } from "../../shared/relative-path.js";
import { checkoutFootprint, requireSpace } from "../../shared/disk-space.js";
import { diskInfo } from "./disk.js";
import { verifyCheckout } from "./checkout-verify.js";
import { adoptSpare, scheduleSpare, takeSpare } from "./spare-checkout.js";
import { removeTree } from "./trash.js";
import { configEnv, STREAM_BIG_BLOBS } from "../../shared/big-blobs.js";
import { finishLfsCheckout, lfsCheckoutRun, prepareLfsCheckout, type LfsCheckout } from "./lfs-checkout.js";
import { ownRemotes, type RemotesPlan } from "./remotes.js";

/** One checkout to materialize: `commit` of `cache`, on `branch` ("" for a detached HEAD). */
export interface CheckoutPlan {
  staging: string;
  checkout: string;
  cache: string;
  commit: string;
  branch: string;
  /** Run just before the final rename (the create's last ownership check). */
  beforeRename: () => void;
  spares: boolean;
  lfs: LfsCheckout;
  remotes: RemotesPlan;
  finish?: (staging: string) => Promise<void>;
}

/**
 * Builds the checkout in `staging` (under `<root>/tmp`) and renames it to `checkout` at the end.
 * Git recreates missing parent directories while writing, so building in place could resurrect a
 * workspace directory that a concurrent destroy just removed; a final rename cannot (it fails).
 * With `spares` (directory sources), a spare checkout of the commit is taken when there is one,
 * and another is built in the background for the next workspace (spare-checkout.ts). `finish`
 * completes either before the rename.
 */
export async function materializeCheckout(plan: CheckoutPlan): Promise<void> {
  const { staging, checkout, cache, commit, branch, beforeRename, spares, lfs, finish } = plan;
  mkdirSync(dirname(staging), { recursive: true, mode: 0o700 });
  try {
    if (spares && (await fromSpare(staging, cache, commit, branch))) {
      await ownRemotes(staging, branch, plan.remotes);
    } else {
      // Refused before the first file is written when the tree cannot fit.
      const disk = diskInfo(dirname(staging));
      const footprint = await checkoutFootprint(cache, commit, disk.blockSize);
      requireSpace(disk, footprint, "the checkout");
      await buildCheckout(staging, plan);
      // Written once this checkout is done (not beside it: on a busy host two checkouts at once
      // take far longer than one after the other), for the next workspace of the commit.
      if (spares) scheduleSpare(cache, commit, footprint, "now");
    }
    // What the commit's tree alone does not give (submodules, the shallow boundary): submodule-checkout.ts.
    await finish?.(staging);
    beforeRename();
    renameSync(staging, checkout);
  } finally {
    // Already gone once renamed into place; a failed checkout's files go off the event loop.
    await removeTree(staging);
  }
}

/** Takes a spare checkout into `staging` and adopts it; false (nothing left there) if none will do. */
async function fromSpare(staging: string, cache: string, commit: string, branch: string): Promise<boolean> {
  if (!(await takeSpare(cache, commit, staging))) return false;
  if (!(await adoptSpare(staging, commit, branch))) {
    await removeTree(staging);
    return false;
  }
  // Its replacement is written in the background, once creates have stopped for a while.
  scheduleSpare(cache, commit, null, "background");
  return true;
}

// Writes files with one worker per core (git >= 2.32; older git ignores the setting): about a
// quarter off a 5,000-file checkout here, which is most of a second workspace's create time.
const PARALLEL_CHECKOUT = ["-c", "checkout.workers=0"];

/** Clones and checks out `plan`'s commit into `checkout` (the staging directory). */
async function buildCheckout(checkout: string, { cache, commit, branch, lfs, remotes }: CheckoutPlan): Promise<void> {
  mkdirSync(checkout, { mode: 0o700 });
  await git(["clone", "--quiet", "--shared", "--no-checkout", cache, checkout]);
  // Before the LFS set-up, which may add its endpoint to the new `origin`.
  await ownRemotes(checkout, branch, remotes);
  await prepareLfsCheckout(checkout, lfs);
  const target = branch ? ["-B", branch, commit] : ["--detach", commit];
  const run = lfsCheckoutRun(lfs);
  const { stderr } = await gitResult([...PARALLEL_CHECKOUT, ...run.args, "checkout", "--quiet", ...target], {
    cwd: checkout,
    // Big blobs are written as they are read, not inflated into memory first.
    env: { ...run.env, ...configEnv(STREAM_BIG_BLOBS) },
    ...(run.timeoutMs !== undefined ? { timeoutMs: run.timeoutMs } : {}),
  });
  await verifyCheckout(checkout, stderr, dirname(checkout));
  await finishLfsCheckout(checkout, lfs);
  if (branch) {
    // Git sources: track the fetched branch so status/pull behave as in a normal clone.
    const upstream = await gitResult(["rev-parse", "--verify", "--quiet", `refs/remotes/origin/${branch}`], {
      cwd: checkout,
      okCodes: [1],
    });
    if (upstream.code === 0) await git(["branch", "--quiet", `--set-upstream-to=origin/${branch}`, branch], { cwd: checkout });
  }
}

function inside(child: string, parent: string): boolean {
  return child === parent || child.startsWith(parent.endsWith("/") ? parent : parent + "/");
}

function realDir(path: string, shown: string): string {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    throw new RuntimeError("input", `Workspace directory does not exist in the checkout: ${shown}`);
  }
  if (!statSync(real).isDirectory()) throw new RuntimeError("input", `Workspace directory is not a directory: ${shown}`);
  return real;
}

/**
 * Canonical workspace root: checkout [+ subdirectory] [+ relativeCwd], each step resolved with
 * realpath so a committed symlink cannot lead outside (the lexical check ran before creation).
 */
export function resolveWorkspaceRoot(checkout: string, subdirectory: string, relativeCwd: string): string {
  const base = realpathSync(checkout);
  const sub = realDir(join(base, subdirectory), subdirectory || ".");
  if (!inside(sub, base)) throw new RuntimeError("input", CWD_ESCAPE_MESSAGE);
  const root = realDir(join(sub, relativeCwd), relativeCwd || ".");
  if (!inside(root, sub)) throw new RuntimeError("input", CWD_ESCAPE_MESSAGE);
  return root;
}
