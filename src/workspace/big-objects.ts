// Big files at streaming cost. A committed file of hundreds of megabytes made a create cost 4 x
// `git archive | ssh tar` because pack-objects deflated it again (zlib level 1: 24 s for 400 MB of
// incompressible data on the shared 2-core rig, against 3.4 s stored) and the host's checkout
// inflated it a second time (3.3 s against 0.9 s). So when the commit's tree holds a blob of at
// least BIG_BLOB_BYTES and the link is fast (the same host or a LAN: bytes cost less than CPU),
// the pack is sent stored (zlib level 0). And every git that touches objects in a create streams
// any blob over BIG_BLOB_BYTES instead of holding it in memory (core.bigFileThreshold: the local
// pack-objects, the host's index-pack and checkout), so no process grows with the largest file;
// such blobs get no delta search, as git already does for blobs over 512 MiB.
import { gitRecords, gitResult } from "../shared/git-exec.js";
import { BIG_BLOB_BYTES } from "../shared/big-blobs.js";

/**
 * Whether `commit`'s tree holds a blob of at least BIG_BLOB_BYTES (one walk of one tree, no
 * history: started before the connection, it is done long before the host asks for objects).
 * False when the repository stores less than that in all (no walk then) or git cannot tell.
 */
export async function holdsBigBlob(repo: string, commit: string): Promise<boolean> {
  const count = await gitResult(["count-objects", "-v"], { cwd: repo, errorClass: "input", okCodes: [1, 128] });
  const kib = (field: string) => Number(new RegExp(`^${field}: (\\d+)$`, "m").exec(count.stdout)?.[1] ?? NaN);
  const stored = (kib("size") + kib("size-pack")) * 1024;
  if (count.code === 0 && !/^alternate:/m.test(count.stdout) && stored < BIG_BLOB_BYTES / 2) return false;
  // Streamed: the listing of a tree of 200,000 files is tens of megabytes.
  let big = false;
  try {
    await gitRecords(["ls-tree", "-r", "-l", "-z", "--full-tree", commit], { cwd: repo, errorClass: "input" }, (e) => {
      const m = /^\d+ blob [0-9a-f]+ +(\d+)\t/.exec(e);
      if (m !== null && Number(m[1]) >= BIG_BLOB_BYTES) big = true;
    });
  } catch {
    return false;
  }
  return big;
}
