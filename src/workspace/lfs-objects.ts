// Git LFS on the Paseo side: finds the LFS pointers of the committed tree (only where a
// .gitattributes of that tree routes files through the lfs filter), which of their objects the
// local LFS store holds (`<git common dir>/lfs/objects`, or `lfs.storage`), and the repository's
// real LFS endpoint for the host's checkout. Then streams the objects the host's per-project store
// lacks, as their raw content back to back (the agent knows each size), read from the store
// without loading any object into memory. Reads only: nothing is written in the local repository.
import { createReadStream, statSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { FrameKind, encodeData, encodeFrame } from "../shared/frames.js";
import type { AgentChannel } from "../transport/agent-channel.js";
import { LfsPointer, type LfsSpec } from "../shared/agent-api.js";
import { RuntimeError } from "../shared/errors.js";
import { gitRecords, gitResult, gitStream } from "../shared/git-exec.js";
import { withoutCredentials } from "./local-remotes.js";

/** Pointer files are small (git-lfs refuses to parse one over 1024 bytes). */
const MAX_POINTER_BYTES = 1024;
/** The shortest pointer: the version line, the oid line and `size 0`. */
const MIN_POINTER_BYTES = "version https://git-lfs.github.com/spec/v1\noid sha256:\nsize 0\n".length + 64;
const POINTER_RE = /^version https:\/\/git-lfs\.github\.com\/spec\/v1\noid sha256:([0-9a-f]{64})\nsize (\d+)\n/;
const GIT_TIMEOUT_MS = 120_000;

export interface LfsPlan {
  spec: LfsSpec;
  /** The local store's objects directory. */
  objects: string;
}

function localGit(repo: string, args: string[], input?: string, okCodes: number[] = []) {
  return gitResult(args, { cwd: repo, errorClass: "input", timeoutMs: GIT_TIMEOUT_MS, okCodes, ...(input ? { input } : {}) });
}

export function objectPath(objects: string, oid: string): string {
  return join(objects, oid.slice(0, 2), oid.slice(2, 4), oid);
}

/** The local LFS objects directory, as git-lfs finds it (lfs.storage is relative to the git dir). */
async function localObjects(repo: string): Promise<string> {
  const common = (await localGit(repo, ["rev-parse", "--path-format=absolute", "--git-common-dir"])).stdout.trim();
  const storage = (await localGit(repo, ["config", "--get", "lfs.storage"], undefined, [1])).stdout.trim();
  const base = storage === "" ? join(common, "lfs") : isAbsolute(storage) ? storage : join(common, storage);
  return join(base, "objects");
}

/** An http(s) URL without credentials, an SSH URL as it is, null for anything meaningless on the host. */
function hostUsable(url: string): string | null {
  if (/^https?:\/\//i.test(url)) return withoutCredentials(url);
  if (/^(ssh|git\+ssh|ssh\+git):\/\//i.test(url) || /^[^/:]+@[^/:]+:/.test(url) || /^[a-z0-9.-]+:[^/]/i.test(url)) return url;
  return null;
}

/**
 * The endpoint `git lfs pull/push` on the host should use, as git-lfs itself would find it here:
 * lfs.url, else remote.origin.lfsurl, else derived from origin's URL (http(s): `<repo>.git/info/lfs`;
 * ssh and scp-like URLs are given as they are, git-lfs authenticates over SSH). A local path or
 * file URL means nothing on the host: none then. A .lfsconfig in the tree outranks the remote keys,
 * as it does here. Values are the local repository's config ("" = unset).
 */
export function lfsEndpointFrom(c: { lfsUrl: string; remoteLfsUrl: string; originUrl: string }): LfsSpec["endpoint"] {
  if (c.lfsUrl) {
    const url = hostUsable(c.lfsUrl);
    return url ? { key: "lfs.url", url } : null;
  }
  if (c.remoteLfsUrl) {
    const url = hostUsable(c.remoteLfsUrl);
    return url ? { key: "remote.origin.lfsurl", url } : null;
  }
  const url = c.originUrl ? hostUsable(c.originUrl) : null;
  if (!url) return null;
  if (!/^https?:\/\//i.test(url)) return { key: "remote.origin.lfsurl", url };
  const trimmed = url.replace(/\/+$/, "");
  return { key: "remote.origin.lfsurl", url: trimmed.endsWith(".git") ? `${trimmed}/info/lfs` : `${trimmed}.git/info/lfs` };
}

async function lfsEndpoint(repo: string): Promise<LfsSpec["endpoint"]> {
  const get = async (key: string) => (await localGit(repo, ["config", "--get", key], undefined, [1])).stdout.trim();
  const [lfsUrl, remoteLfsUrl, originUrl] = await Promise.all([get("lfs.url"), get("remote.origin.lfsurl"), get("remote.origin.url")]);
  return lfsEndpointFrom({ lfsUrl, remoteLfsUrl, originUrl });
}

/** Whether any .gitattributes of the commit's tree names the lfs filter (one tree walk in git). */
async function usesLfs(repo: string, commit: string): Promise<boolean> {
  const r = await localGit(repo, ["grep", "-q", "-F", "filter=lfs", commit, "--", ":(glob)**/.gitattributes"], undefined, [1]);
  return r.code === 0;
}

/**
 * The tree's files whose content is an LFS pointer, read as git lists them: the candidates (blobs
 * of a pointer's possible size) go to one `cat-file --batch` while the listing streams, and only
 * real pointers are kept, so a tree of 200,000 small files is never in memory whole (its listing
 * and small blobs were tens of megabytes in the runtime process).
 */
async function treePointers(repo: string, commit: string): Promise<Array<Omit<LfsPointer, "local">>> {
  const batch = gitStream(["cat-file", "--batch"], { cwd: repo, errorClass: "input", timeoutMs: GIT_TIMEOUT_MS });
  batch.stdin.on("error", () => undefined);
  // Paths of the candidates asked for and not yet answered, in order (cat-file answers in order).
  const asked: string[] = [];
  const found: Array<Omit<LfsPointer, "local">> = [];
  let failed: unknown = null;
  const reading = (async () => {
    let buf: Buffer = Buffer.alloc(0);
    for await (const chunk of batch.stdout as AsyncIterable<Buffer>) {
      buf = buf.length > 0 ? Buffer.concat([buf, chunk]) : chunk;
      for (;;) {
        // "<oid> blob <size>\n<content>\n", or "<oid> missing\n"
        const eol = buf.indexOf(0x0a);
        if (eol < 0) break;
        const [, type, size] = buf.subarray(0, eol).toString("latin1").split(" ");
        const end = type === "blob" ? eol + 1 + Number(size) + 1 : eol + 1;
        if (buf.length < end) break;
        const path = asked.shift();
        const pointer = type === "blob" ? parsePointer(buf.subarray(eol + 1, end - 1).toString("latin1")) : null;
        if (pointer && path !== undefined) found.push({ path, ...pointer });
        buf = buf.subarray(end);
      }
      buf = Buffer.from(buf);
    }
  })();
  reading.catch((err: unknown) => {
    failed ??= err;
    batch.kill();
  });
  const writable = () =>
    new Promise<void>((resolve) => {
      if (batch.stdin.destroyed || !batch.stdin.writableNeedDrain) return resolve();
      const done = () => {
        batch.stdin.off("drain", done).off("close", done).off("error", done);
        resolve();
      };
      batch.stdin.on("drain", done).on("close", done).on("error", done);
    });
  try {
    await gitRecords(
      ["ls-tree", "-r", "-l", "-z", "--full-tree", commit],
      { cwd: repo, errorClass: "input", timeoutMs: GIT_TIMEOUT_MS },
      (entry) => {
        if (failed !== null) throw failed;
        // "<mode> blob <oid> <size>\t<path>"
        const m = /^100[0-7]{3} blob ([0-9a-f]+) +(\d+)\t(.*)$/s.exec(entry);
        if (!m || Number(m[2]) < MIN_POINTER_BYTES || Number(m[2]) > MAX_POINTER_BYTES) return;
        asked.push(m[3]!);
        if (!batch.stdin.write(`${m[1]}\n`)) return writable();
      },
    );
    batch.stdin.end();
    await reading;
    await batch.done;
  } catch (err) {
    batch.kill();
    throw failed ?? err;
  }
  return found;
}

/**
 * The oid and size of an LFS pointer, or null for a file that is not one. A pointer is what the
 * agent's schema (LfsPointer) takes, so both sides agree: a pointer-shaped file whose size is
 * beyond 2^53 is an ordinary file, not a request every create would fail on.
 */
export function parsePointer(text: string): { oid: string; size: number } | null {
  const m = POINTER_RE.exec(text);
  if (!m) return null;
  const pointer = { path: "", oid: m[1]!, size: Number(m[2]), local: false };
  return LfsPointer(pointer) ? { oid: pointer.oid, size: pointer.size } : null;
}

function heldLocally(objects: string, oid: string, size: number): boolean {
  try {
    const st = statSync(objectPath(objects, oid));
    return st.isFile() && st.size === size;
  } catch {
    return false;
  }
}

/** The commit's LFS pointers and where their objects are, or null when its tree uses no LFS. */
export async function lfsPlan(repo: string, commit: string): Promise<LfsPlan | null> {
  if (!(await usesLfs(repo, commit))) return null;
  const [found, objects, endpoint] = await Promise.all([treePointers(repo, commit), localObjects(repo), lfsEndpoint(repo)]);
  if (found.length === 0) return null;
  const all = found.map((p) => ({ ...p, local: heldLocally(objects, p.oid, p.size) }));
  // An object's sha256 fixes its size: beside the object held here, a pointer naming its oid with
  // another size points at nothing, and is an ordinary file (the host keeps one pointer per oid,
  // and that one must not cost the real files their content).
  const held = new Set(all.filter((p) => p.local).map((p) => p.oid));
  const pointers = all.filter((p) => p.local || !held.has(p.oid));
  return { spec: { pointers, endpoint, ...(pointers.length < all.length ? { only: true } : {}) }, objects };
}

/** Paths for a progress line: the first few by name, then how many more (a tree may hold thousands). */
export function namePaths(paths: string[], shown = 20): string {
  const more = paths.length - shown;
  return paths.slice(0, shown).join(", ") + (more > 0 ? `, … (${more} more)` : "");
}

/**
 * Streams the requested objects (each one offered as local by one of `plans`: the superproject's
 * and its submodules', each read from its own store) to the agent, then Eof.
 */
export async function sendLfsObjects(
  channel: AgentChannel,
  plans: LfsPlan[],
  oids: string[],
  stop: AbortSignal,
): Promise<{ bytes: number; objects: number }> {
  const offered = new Map<string, { size: number; objects: string }>();
  for (const plan of plans) for (const p of plan.spec.pointers) if (p.local) offered.set(p.oid, { size: p.size, objects: plan.objects });
  let bytes = 0;
  for (const oid of oids) {
    const source = offered.get(oid);
    if (source === undefined) throw new RuntimeError("remote", `the agent asked for an LFS object that was not offered: ${oid}`);
    const { size, objects } = source;
    let sent = 0;
    const file = createReadStream(objectPath(objects, oid), { highWaterMark: 256 * 1024 });
    try {
      for await (const chunk of file as AsyncIterable<Buffer>) {
        if (stop.aborted || channel.closed) throw new RuntimeError("network", "the LFS object stream was cut");
        // The agent splits the stream by the sizes it was told: a file that grew must not shift it.
        const part = chunk.subarray(0, Math.max(0, size - sent));
        sent += part.length;
        if (part.length > 0) channel.send(encodeData(FrameKind.Stdin, part));
        await channel.drained();
      }
    } catch (err) {
      if (err instanceof RuntimeError) throw err;
      throw new RuntimeError("input", `Cannot read LFS object ${oid} from ${objects}: ${(err as Error).message}`);
    } finally {
      file.destroy();
    }
    if (sent !== size) throw new RuntimeError("input", `LFS object ${oid} in ${objects} is shorter than its pointer says`);
    bytes += sent;
  }
  channel.send(encodeFrame(FrameKind.Eof, Buffer.from([0])));
  return { bytes, objects: oids.length };
}
