// Receives the pack the runtime streams into a project cache without ever leaving half a pack in
// it: `git index-pack --fix-thin` writes into a private quarantine directory under `<root>/tmp`
// (reading the cache's objects as an alternate to complete the thin pack), and only a complete,
// verified pack is moved into the cache. Whatever ends the transfer (a killed or failing
// index-pack, a full disk, an abort) removes the quarantine, so the cache keeps no tmp_pack_*.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { RuntimeError } from "../../shared/errors.js";
import { gitStream } from "../../shared/git-exec.js";
import { rootLayout } from "../layout.js";
import { TRANSFER_TIMEOUT_MS } from "./git-cache.js";
import { explainNoSpace } from "./disk.js";
import { removeTree } from "./trash.js";
import { configEnv, STREAM_BIG_BLOBS } from "../../shared/big-blobs.js";
import type { FrameInbox } from "./frame-inbox.js";

/** Name prefix of quarantine directories in `<root>/tmp` (pruned by reconcile when abandoned). */
export const INCOMING_PREFIX = "incoming-";

function receiveFailure(err: unknown): unknown {
  if (!(err instanceof RuntimeError) || (err.code !== "git-failed" && err.code !== "git-not-a-repository" && err.code !== "git-missing"))
    return err;
  return new RuntimeError("remote", `Receiving objects on the remote host failed: ${err.message}`);
}

/**
 * Moves the quarantine's pack files into the cache: data first, the .idx last, because a pack
 * becomes visible to git only once its index is there. Names are content hashes, so a concurrent
 * create that brought the same pack just replaces an identical file.
 */
function publish(from: string, to: string): void {
  const names = readdirSync(from).sort((a, b) => Number(a.endsWith(".idx")) - Number(b.endsWith(".idx")));
  for (const name of names) {
    try {
      renameSync(join(from, name), join(to, name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EXDEV") throw err;
      const tmp = join(to, `.${name}.${randomBytes(4).toString("hex")}.tmp`);
      try {
        copyFileSync(join(from, name), tmp);
        renameSync(tmp, join(to, name));
      } finally {
        rmSync(tmp, { force: true });
      }
    }
  }
}

/** Feeds the object stream into index-pack in quarantine and publishes the pack into `cache`. */
export async function receivePack(root: string, cache: string, inbox: FrameInbox): Promise<void> {
  const tmpBase = rootLayout(root).tmpBase;
  mkdirSync(tmpBase, { recursive: true, mode: 0o700 });
  const quarantine = mkdtempSync(join(tmpBase, INCOMING_PREFIX));
  try {
    mkdirSync(join(quarantine, "pack"));
    const stream = gitStream(["index-pack", "--stdin", "--fix-thin"], {
      cwd: cache,
      timeoutMs: TRANSFER_TIMEOUT_MS,
      env: { GIT_OBJECT_DIRECTORY: quarantine, GIT_ALTERNATE_OBJECT_DIRECTORIES: join(cache, "objects"), ...configEnv(STREAM_BIG_BLOBS) },
    });
    stream.stdout.resume();
    const exited = stream.done.catch((err: unknown) => {
      throw receiveFailure(err);
    });
    try {
      await inbox.pipeStdinTo(stream.stdin, exited, TRANSFER_TIMEOUT_MS);
      stream.stdin.end();
      await exited;
    } catch (err) {
      stream.kill();
      // Its files must be closed before the quarantine goes.
      await stream.done.catch(() => undefined);
      throw err;
    }
    publish(join(quarantine, "pack"), join(cache, "objects", "pack"));
  } catch (err) {
    throw explainNoSpace(err, root, "while receiving objects");
  } finally {
    await removeTree(quarantine);
  }
}
