// Spare checkouts: the host daemon keeps one verified, unused checkout of a recently created commit
// beside its project cache (`<cache>/paseo-spares/<commit>`), so the next workspace of that commit
// takes it with one rename instead of writing every file again. Writing the files is what a second
// workspace costs (thousands of file creations; no object moves), so a spare is written right after
// a create's own checkout, and a taken spare is replaced once the daemon has had no create for a
// while.
// A spare is taken whole (renamed away), never shared: workspaces stay fully independent. It is
// only an optimisation: it is built only where the disk keeps ample room after it, expires when
// unused, and a spare that fails its check on adoption is thrown away for a fresh checkout.
// A spare sits under the root, where anything running as the login user (a workload of another
// workspace) can reach it; it is handed out only as this daemon built it: its whole `.git` (index,
// config, hooks, info, refs) byte for byte as digested when it was built (so no index flag, no
// hook or config, no replace ref was added), no untracked or ignored file or directory, and every
// file as its index says. A spare this daemon did not build (an earlier daemon's) is thrown away.
import { createReadStream, existsSync, mkdirSync, readdirSync, renameSync, statfsSync, statSync } from "node:fs";
import { lstat, readdir, readlink } from "node:fs/promises";
import { join } from "node:path";
import { createHash, randomBytes } from "node:crypto";
import { oneLine } from "../../shared/errors.js";
import { git, gitResult } from "../../shared/git-exec.js";
import { checkoutFootprint, withMargin, type Footprint } from "../../shared/disk-space.js";
import { diskInfo } from "./disk.js";
import { verifyCheckout } from "./checkout-verify.js";
import { isGone, readProcStat } from "../../shared/proc-stat.js";
import { sleep } from "../../shared/async.js";
import { discardTreeLater, removeTree } from "./trash.js";
import { rootOfCache } from "./git-cache.js";
import { configEnv, STREAM_BIG_BLOBS } from "../../shared/big-blobs.js";

const SPARES = "paseo-spares";
const BUILDING = ".building-";
/** An unused spare is removed after this long: it only pays for a burst of creates. */
const SPARE_TTL_MS = 30 * 60_000;
/** Spares kept per project cache (newest kept); each is a whole checkout on disk. */
const MAX_SPARES = 2;
/** Room a spare must leave free on the disk: never the reason a disk fills up. */
const RESERVE_MIN_BYTES = 1024 ** 3;
const RESERVE_FRACTION = 0.1;

/** One checkout worker per core, as a create's own checkout (git >= 2.32; older git ignores it). */
const PARALLEL_CHECKOUT = ["-c", "checkout.workers=0"];

let enabled = false;
/** Digest of each ready spare's `.git` as this daemon built it, by the spare's path. */
const builtGit = new Map<string, string>();
/** The same digest for a spare taken into a staging directory, until it is adopted. */
const takenGit = new Map<string, string>();

/**
 * Every entry under `<checkout>/.git` (paths, types, modes, file contents, link targets), hashed.
 * Small for a shared clone (the objects stay in the cache); the index is most of it.
 */
async function gitDirDigest(checkout: string): Promise<string> {
  const hash = createHash("sha256");
  const walk = async (rel: string): Promise<void> => {
    const path = join(checkout, ".git", rel);
    const st = await lstat(path);
    hash.update(`${rel}\0${st.mode}\0`);
    if (st.isSymbolicLink()) hash.update(await readlink(path));
    // Streamed: the index of a big tree is tens of megabytes.
    else if (st.isFile()) for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
    else if (st.isDirectory()) for (const name of (await readdir(path)).sort()) await walk(rel ? `${rel}/${name}` : name);
    hash.update("\0");
  };
  await walk("");
  return hash.digest("hex");
}

/** Builds running in this process, by `<cache>\0<commit>`. */
const building = new Map<string, { run: Promise<void>; background: boolean }>();

/**
 * Only the host daemon builds spares: a one-shot agent exits after its answer and would leave a
 * half-built spare and a git child behind.
 */
export function enableSpareCheckouts(): void {
  enabled = true;
}

/** Ends every build under way (the daemon is exiting); what they leave is swept later. */
const stopping = new AbortController();
export function stopSpareBuilds(): void {
  stopping.abort();
}

/** Spare builds under way (the daemon is not idle while one runs). */
export function spareBuildsRunning(): number {
  return building.size;
}

const sparesDir = (cache: string) => join(cache, SPARES);
const keyOf = (cache: string, commit: string) => `${cache}\0${commit}`;

function log(line: string): void {
  try {
    process.stderr.write(`${new Date().toISOString()} spare checkouts ${process.pid}: ${line}\n`);
  } catch {
    // a full disk loses the log line, nothing else
  }
}

/**
 * Removes expired spares, the oldest beyond MAX_SPARES, and builds whose process is gone (each
 * create that uses the cache, and reconcile for every cache it keeps).
 */
export function sweepSpares(cache: string): void {
  const root = rootOfCache(cache);
  const dir = sparesDir(cache);
  if (!existsSync(dir)) return;
  const ready: { name: string; mtimeMs: number }[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (name.startsWith(BUILDING)) {
      // `.building-<pid>-<start time>-<random>`: its builder's identity, as lock files record it.
      const [pid = "", startTime = ""] = name.slice(BUILDING.length).split("-");
      const ours = Number(pid) === process.pid;
      const orphaned = ours ? ![...building.keys()].some((k) => k.startsWith(`${cache}\0`)) : isGone(Number(pid), startTime);
      if (orphaned) discardTreeLater(root, path, "spare");
      continue;
    }
    try {
      ready.push({ name, mtimeMs: statSync(path).mtimeMs });
    } catch {
      // taken meanwhile
    }
  }
  ready.sort((a, b) => b.mtimeMs - a.mtimeMs);
  ready.forEach((s, i) => {
    if (i >= MAX_SPARES || Date.now() - s.mtimeMs > SPARE_TTL_MS) discardTreeLater(root, join(dir, s.name), "spare");
  });
}

/**
 * Moves the spare of `commit` to `into` (which must not exist); false when there is none. Waits
 * for a build of it that a create started in this daemon: it began earlier than a checkout would.
 */
export async function takeSpare(cache: string, commit: string, into: string): Promise<boolean> {
  const pending = building.get(keyOf(cache, commit));
  // A niced build may crawl on a busy host: then a checkout of our own is the faster way.
  if (pending && !pending.background) await pending.run;
  try {
    sweepSpares(cache);
    const from = join(sparesDir(cache), commit);
    renameSync(from, into);
    const digest = builtGit.get(from);
    builtGit.delete(from);
    if (digest) takenGit.set(into, digest);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // None there (or a concurrent create took it), or the root spans filesystems: check out instead.
    if (code === "ENOENT" || code === "EXDEV") return false;
    throw err;
  }
}

/**
 * Makes a taken spare the workspace's checkout: HEAD on `branch` (or detached) at `commit`, set
 * with plumbing (the files and the index are the commit's already, with their stat data), then
 * proves it: the index is the commit's tree and every file matches its index entry (stat data,
 * or content where stat data cannot tell; a missing file counts). False (logged) when it does not
 * hold: only a cache of ours went bad, and the caller checks out afresh instead.
 */
export async function adoptSpare(checkout: string, commit: string, branch: string): Promise<boolean> {
  const built = takenGit.get(checkout);
  takenGit.delete(checkout);
  try {
    if (!built) {
      log(`spare of ${commit} thrown away: this daemon did not build it, so nothing vouches for its .git`);
      return false;
    }
    if ((await gitDirDigest(checkout)) !== built) {
      log(`spare of ${commit} thrown away: its .git (index, config, hooks, info or refs) changed since it was built`);
      return false;
    }
    // Untracked and ignored alike (no exclude rules given), empty directories too.
    const others = await git(["ls-files", "-z", "--others", "--directory"], { cwd: checkout });
    if (others !== "") {
      log(`spare of ${commit} thrown away: it holds files its commit does not (${oneLine(others.split("\0")[0]!)}, …)`);
      return false;
    }
    if (branch) {
      await git(["update-ref", `refs/heads/${branch}`, commit], { cwd: checkout });
      await git(["symbolic-ref", "HEAD", `refs/heads/${branch}`], { cwd: checkout });
    } else {
      await git(["update-ref", "--no-deref", "HEAD", commit], { cwd: checkout });
    }
    const [index, files] = await Promise.all([
      gitResult(["diff-index", "--cached", "--quiet", commit], { cwd: checkout, okCodes: [1] }),
      gitResult(["diff-files", "--quiet"], { cwd: checkout, okCodes: [1] }),
    ]);
    if (index.code === 0 && files.code === 0) return true;
    log(`spare of ${commit} thrown away: it differs from its commit`);
  } catch (err) {
    log(`spare of ${commit} thrown away: ${oneLine(err instanceof Error ? err.message : String(err))}`);
  }
  return false;
}

/** Creates under way in this daemon, and when the last one ended: background spares wait for quiet. */
let creating = 0;
let lastCreateEnd = 0;
/** How long no create must have run before a background spare starts writing. */
const QUIET_MS = 5_000;

/** Marks a create under way until the returned function is called. */
export function createUnderWay(): () => void {
  creating++;
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    creating--;
    lastCreateEnd = Date.now();
  };
}

/**
 * Resolves true once no create has run for QUIET_MS (a spare written meanwhile would slow that
 * create down: its files compete for the same disk, whatever its CPU priority); false when the
 * daemon stops or quiet never comes within SPARE_TTL_MS.
 */
async function quiet(): Promise<boolean> {
  const giveUp = Date.now() + SPARE_TTL_MS;
  while (!stopping.signal.aborted && Date.now() < giveUp) {
    if (creating === 0 && Date.now() - lastCreateEnd >= QUIET_MS) return true;
    await sleep(1000);
  }
  return false;
}

/**
 * Starts building a spare of `commit` (daemon only, at most one per commit, none when one is
 * ready), provided the disk keeps ample room after it. "now": a create may soon wait for it;
 * "background": once no create has run for a while, at the lowest CPU priority (nothing waits for
 * it yet). Failures only cost the spare (logged).
 */
export function scheduleSpare(cache: string, commit: string, footprint: Footprint | null, when: "now" | "background"): void {
  const key = keyOf(cache, commit);
  if (!enabled || stopping.signal.aborted || building.has(key) || existsSync(join(sparesDir(cache), commit))) return;
  const run = (async () => {
    if (when === "background" && !(await quiet())) return;
    const need = footprint ?? (await checkoutFootprint(cache, commit, diskInfo(cache).blockSize));
    if (roomFor(cache, need)) await buildSpare(cache, commit, when === "background");
  })()
    .catch((err: unknown) => log(`spare of ${commit} not built: ${oneLine(err instanceof Error ? err.message : String(err))}`))
    .finally(() => building.delete(key));
  building.set(key, { run, background: when === "background" });
}

function roomFor(cache: string, need: Footprint): boolean {
  const disk = diskInfo(cache);
  if (typeof statfsSync !== "function") return false; // node before 18.15: the disk's size is unknown
  const st = statfsSync(cache);
  const reserve = Math.max(RESERVE_MIN_BYTES, st.blocks * st.bsize * RESERVE_FRACTION);
  if (disk.freeBytes < withMargin(need.bytes) + reserve) return false;
  return disk.freeFiles === null || disk.freeFiles > 2 * need.files + 100_000;
}

async function buildSpare(cache: string, commit: string, background: boolean): Promise<void> {
  const dir = sparesDir(cache);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  sweepSpares(cache);
  const me = `${process.pid}-${readProcStat(process.pid)?.startTime ?? ""}`;
  const tmp = join(dir, `${BUILDING}${me}-${randomBytes(4).toString("hex")}`);
  try {
    mkdirSync(tmp, { mode: 0o700 });
    const signal = stopping.signal;
    await git(["clone", "--quiet", "--shared", "--no-checkout", cache, tmp], { background, signal });
    const { stderr } = await gitResult([...PARALLEL_CHECKOUT, "checkout", "--quiet", "--detach", commit], {
      cwd: tmp,
      timeoutMs: 600_000,
      background,
      signal,
      env: configEnv(STREAM_BIG_BLOBS),
    });
    await verifyCheckout(tmp, stderr, tmp);
    const digest = await gitDirDigest(tmp);
    // A concurrent create's spare of the same commit may have landed first: keep that one.
    if (!existsSync(join(dir, commit))) {
      renameSync(tmp, join(dir, commit));
      builtGit.set(join(dir, commit), digest);
    }
  } finally {
    await removeTree(tmp);
  }
}
