// Ships the objects a remote cache lacks: `git pack-objects --revs --thin --stdout` on the Paseo
// host (reads the repository, writes nothing into it) streamed as Stdin data frames, then an Eof
// frame. The agent completes the thin pack with `index-pack --fix-thin` against its own objects.
import { PassThrough } from "node:stream";
import { FrameKind, encodeData, encodeFrame } from "../shared/frames.js";
import type { AgentChannel } from "../transport/agent-channel.js";
import { gitResult, gitStream, knownCommits, type GitStream } from "../shared/git-exec.js";
import { checkoutFootprint, formatBytes, requireSpace, withMargin, type DiskInfo } from "../shared/disk-space.js";
import { configEnv, STREAM_BIG_BLOBS } from "../shared/big-blobs.js";

const PACK_TIMEOUT_MS = 600_000;

/** Keeps only the offered bases the local repository also has (pack-objects needs them). */
export function localHaves(repo: string, offered: string[]): Promise<string[]> {
  return knownCommits(repo, offered, "input");
}

/**
 * What the local repository stores in all (`count-objects`: loose and packed, every branch): at
 * least what any transfer from it sends, unless it borrows objects from elsewhere (alternates),
 * when nothing cheap bounds it (null).
 */
async function storedBytes(repo: string): Promise<number | null> {
  const out = await gitResult(["count-objects", "-v"], { cwd: repo, errorClass: "input", okCodes: [1, 128] });
  if (out.code !== 0 || /^alternate:/m.test(out.stdout)) return null;
  const kib = (field: string) => Number(new RegExp(`^${field}: (\\d+)$`, "m").exec(out.stdout)?.[1] ?? NaN);
  const total = (kib("size") + kib("size-pack")) * 1024;
  return Number.isFinite(total) ? total : null;
}

/**
 * Refuses before sending anything when the host's disk cannot hold the objects plus the checkout.
 * The objects are counted as they are stored here: when even everything the repository stores fits,
 * that settles it; otherwise exactly what this transfer sends (`rev-list --disk-usage`, git >= 2.38;
 * an older git counts only the checkout), which is close to the size of the pack the host keeps.
 */
export async function requireRemoteSpace(repo: string, commit: string, haves: string[], disk: DiskInfo): Promise<void> {
  const [stored, checkout] = await Promise.all([storedBytes(repo), checkoutFootprint(repo, commit, disk.blockSize)]);
  let objects = stored ?? 0;
  if (stored === null || disk.freeBytes < withMargin(stored + checkout.bytes)) {
    const revs = [commit, ...haves.map((h) => `^${h}`)].join("\n") + "\n";
    const usage = await gitResult(["rev-list", "--objects", "--disk-usage", "--stdin"], {
      cwd: repo,
      input: revs,
      okCodes: [1, 128, 129],
      errorClass: "input",
    });
    objects = usage.code === 0 ? Number(usage.stdout.trim()) || 0 : 0;
  }
  const what = `this workspace (${formatBytes(objects)} of objects, a ${formatBytes(checkout.bytes)} checkout)`;
  requireSpace(disk, { bytes: objects + checkout.bytes, files: checkout.files }, what);
}

/**
 * The submodules' variant: their objects are counted as their repositories store them (union-repo.ts
 * links their files, which git cannot size), a bound on any pack of them; their checkout is checked
 * by the host before it writes them (one listing of all their trees there).
 */
export function requireRemoteSpaceFor(stored: number, paths: string[], disk: DiskInfo): void {
  requireSpace(
    disk,
    { bytes: stored, files: 0 },
    `the objects of ${paths.length} submodule${paths.length === 1 ? "" : "s"} (${formatBytes(stored)})`,
  );
}

/**
 * Starts packing `commits` (one, or every submodule's at once) minus `haves` (nothing is read yet: pack-objects enumerates objects and
 * then waits on the full pipe, so this overlaps its counting with the disk-space check).
 * `fastLink`: the link moves bytes faster than zlib's default level makes them (a round trip of a
 * few milliseconds: the same host or a LAN), so objects that must be compressed here use level 1,
 * which costs a third of the CPU for a few percent more bytes; deltas and objects already
 * compressed in the repository's packs are reused as they are either way (see PackShape for the rest).
 */
export interface PackShape {
  /** The link is fast (above): objects that must be compressed here use level 1. */
  fastLink: boolean;
  /** A shallow history on either side (local-shallow.ts): the boundary lines that come before the revisions. */
  shallow?: { revs: string[] } | null;
  /** The commit holds a big blob (big-objects.ts): on a fast link everything goes at level 0. */
  stored?: boolean;
}

export function startPack(repo: string, commits: string[], haves: string[], shape: PackShape): GitStream {
  const { fastLink, shallow = null, stored = false } = shape;
  // `--shallow` takes every have's tree as a delta base, not only those of the commit's parents
  // (a commit cut from its parents has none: the pack would carry every file again).
  const extra = shallow ? shallow.revs : [];
  const revs = [...extra, ...commits, ...haves.map((h) => `^${h}`)].join("\n") + "\n";
  // A first transfer (nothing on the host yet) skips the delta search among loose objects: it
  // dominated create time (5,000 fresh files: 4.2 s of pack-objects vs 1.6 s) while deltas already
  // in the repository's packs are still reused. Later, small transfers keep the search, where a
  // delta against the host's copy of a large file is what keeps them small.
  const search = haves.length === 0 ? ["--window=0"] : [];
  const level = configEnv({ ...STREAM_BIG_BLOBS, ...(fastLink ? { "pack.compression": stored ? "0" : "1" } : {}) });
  const edges = shallow ? ["--shallow"] : [];
  const pack = gitStream(["pack-objects", "--revs", "--thin", "--stdout", "--delta-base-offset", "--quiet", ...search, ...edges], {
    cwd: repo,
    timeoutMs: PACK_TIMEOUT_MS,
    errorClass: "input",
    env: level,
  });
  pack.stdin.end(revs);
  // Its failure is awaited where the pack is read; a pack never read is killed by its owner.
  pack.done.catch(() => undefined);
  // Taken into a stream of ours at once: output nobody listens to yet is thrown away by Node when
  // the child exits (a small pack is complete before the check ends). The pipe still holds
  // pack-objects back once 1 MiB waits here.
  const stdout = new PassThrough({ highWaterMark: 1024 * 1024 });
  pack.stdout.pipe(stdout);
  return { ...pack, stdout };
}

/**
 * Streams a started pack (startPack) to the agent; resolves with the bytes sent. `stop` ends it early (the
 * agent already failed).
 */
export async function sendObjects(channel: AgentChannel, pack: GitStream, stop?: AbortSignal): Promise<number> {
  let bytes = 0;
  const onClose = () => pack.kill();
  channel.once("close", onClose);
  stop?.addEventListener("abort", onClose);
  try {
    for await (const chunk of pack.stdout as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      channel.send(encodeData(FrameKind.Stdin, chunk));
      // Pull from pack-objects only as fast as the link drains: a big first transfer must not
      // pile up in memory.
      await channel.drained();
    }
    await pack.done;
  } finally {
    channel.off("close", onClose);
    stop?.removeEventListener("abort", onClose);
  }
  channel.send(encodeFrame(FrameKind.Eof, Buffer.from([0])));
  return bytes;
}
