// Writes the files of many submodules with a handful of git processes instead of a few each (1,000
// submodules took minutes: every git process costs milliseconds, tens of them on a busy host).
// The submodules of one nesting level become one tree (`mktree`: each one's root tree under its
// index), checked out once with a private index into a directory inside the checkout; each
// submodule's directory is then renamed into its place and gets its own part of that index
// (index-file.ts), so its files keep the stat data git recorded and `git status` stays cheap.
// Their git dirs, configs and registrations are plain files written here (submodule-checkout.ts).
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { RuntimeError } from "../../shared/errors.js";
import { gitResult } from "../../shared/git-exec.js";
import { configEnv, STREAM_BIG_BLOBS } from "../../shared/big-blobs.js";
import { checkoutFootprint, requireSpace } from "../../shared/disk-space.js";
import { readIndex, type IndexEntry } from "./index-file.js";
import { entryPath, present, requireComplete, type Tally } from "./checkout-verify.js";
import { diskInfo } from "./disk.js";
import { removeTree } from "./trash.js";

const CHECKOUT_TIMEOUT_MS = 600_000;

/** One submodule to write: its commit, and where its files go (an empty directory). */
export interface BatchItem {
  commit: string;
  workTree: string;
  /** Shown in messages. */
  path: string;
}

/**
 * Writes every item's tree (objects from `store`) into its work tree (`lfs`: the LFS filter's
 * arguments and environment, lfs-checkout.ts lfsCheckoutRun); resolves with each one's
 * index entries (paths relative to its work tree), in `items` order. `checkout` is the checkout
 * being built: the batch's scratch directory lives inside it (renames stay on one filesystem).
 */
export async function checkoutBatch(
  store: string,
  checkout: string,
  items: BatchItem[],
  lfs: { args: string[]; env: Record<string, string> } = { args: [], env: {} },
): Promise<IndexEntry[][]> {
  const scratch = mkdtempSync(join(checkout, ".paseo-submodules-"));
  try {
    mkdirSync(join(scratch, "objects"));
    mkdirSync(join(scratch, "work"));
    // The combined tree is written into the scratch directory, never into the shared cache.
    const env = {
      GIT_OBJECT_DIRECTORY: join(scratch, "objects"),
      GIT_ALTERNATE_OBJECT_DIRECTORIES: join(store, "objects"),
      GIT_INDEX_FILE: join(scratch, "index"),
      // As for every checkout of a create: no filter may wait for a server.
      GIT_LFS_SKIP_SMUDGE: "1",
    };
    const run = (args: string[], input?: string) =>
      gitResult(args, { cwd: store, env, timeoutMs: CHECKOUT_TIMEOUT_MS, ...(input === undefined ? {} : { input }) });
    const trees = (
      await run(["cat-file", "--batch-check=%(objectname) %(objecttype)"], items.map((i) => `${i.commit}^{tree}\n`).join(""))
    ).stdout
      .split("\n")
      .slice(0, items.length);
    const listing = trees.map((line, i) => {
      const [id, type] = line.split(" ");
      if (type !== "tree") throw new RuntimeError("remote", `the tree of submodule ${items[i]!.path} is not in its cache`);
      return `040000 tree ${id}\t${i}\n`;
    });
    const tree = (await run(["mktree"], listing.join(""))).stdout.trim();
    const disk = diskInfo(checkout);
    const what = items.length === 1 ? `the checkout of submodule ${items[0]!.path}` : `the checkout of ${items.length} submodules`;
    requireSpace(disk, await checkoutFootprint(store, tree, disk.blockSize, env), what);
    const work = join(scratch, "work");
    const { stderr } = await gitResult(
      ["-c", "checkout.workers=0", "-c", "index.version=2", ...lfs.args, `--work-tree=${work}`, "read-tree", "--reset", "-u", tree],
      { cwd: store, env: { ...env, ...lfs.env, ...configEnv(STREAM_BIG_BLOBS) }, timeoutMs: CHECKOUT_TIMEOUT_MS, okCodes: [] },
    );
    const byItem = splitByItem(readIndex(readFileSync(join(scratch, "index"))), items.length);
    const tally: Tally = { total: 0, missing: 0, first: "" };
    for (const [i, item] of items.entries()) {
      // An empty tree writes no directory: the submodule's stays as the parent's checkout left it.
      if (exists(join(work, String(i)))) {
        rmdirSync(item.workTree);
        renameSync(join(work, String(i)), item.workTree);
      }
      for (const e of byItem[i]!) {
        tally.total++;
        if (present(entryPath(item.workTree, e.path), (e.fixed.readUInt32BE(24) >>> 0).toString(8)) || tally.missing++ > 0) continue;
        tally.first = `${item.path}/${e.path.toString("utf8")}`;
      }
    }
    requireComplete(tally, stderr, checkout);
    return byItem;
  } finally {
    await removeTree(scratch);
  }
}

function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** The combined index cut into each item's entries (`<index>/<path>` → `<path>`), in git's order still. */
function splitByItem(entries: IndexEntry[], count: number): IndexEntry[][] {
  const out: IndexEntry[][] = Array.from({ length: count }, () => []);
  for (const e of entries) {
    const slash = e.path.indexOf(0x2f);
    const i = slash < 0 ? NaN : Number(e.path.toString("latin1", 0, slash));
    if (!Number.isInteger(i) || i < 0 || i >= count) throw new RuntimeError("remote", "unexpected entry in the submodules' checkout index");
    out[i]!.push({ fixed: e.fixed, path: e.path.subarray(slash + 1) });
  }
  return out;
}
