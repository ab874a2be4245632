// Receives a pack of a workspace's commits from the host into a Paseo side repository, the way
// git's receive-pack does: into a quarantine object directory first, where index-pack verifies
// every object and a connectivity walk proves that the commits asked for are complete, and only
// then into the repository's objects. A host that sends garbage, too much, or commits without
// their objects leaves nothing behind. Used by the work that comes back and by merge-to-base.
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { RuntimeError } from "../shared/errors.js";
import { FrameKind, type Frame } from "../shared/frames.js";
import { gitResult, gitStream } from "../shared/git-exec.js";
import { requestFor, type RemoteHost } from "../transport/host.js";

const IMPORT_TIMEOUT_MS = 600_000;
/** Bound of one pack from the host: a commit bigger than this stays on the host (archived at removal). */
export const DEFAULT_MAX_PACK_BYTES = 1024 * 1024 * 1024;

export interface PackRequest {
  workspaceId: string;
  owner: string;
  /** Commits the pack must complete. */
  wants: string[];
  /** Commits the repository has (the pack leaves out what they reach). */
  haves: string[];
}

/** Moves the quarantine's packs into the repository: each .idx last, so no reader sees an index without its pack. */
function migrate(quarantine: string, objects: string): void {
  const packDir = join(objects, "pack");
  mkdirSync(packDir, { recursive: true });
  const names = readdirSync(join(quarantine, "pack"));
  const order = (n: string) => (n.endsWith(".idx") ? 1 : 0);
  for (const n of names.sort((a, b) => order(a) - order(b))) renameSync(join(quarantine, "pack", n), join(packDir, n));
}

/**
 * Streams `workspace.export-objects` into `gitDir`. Refuses (nothing written) a pack larger than
 * `maxBytes`, one index-pack rejects, or one that does not complete `wants`.
 */
export async function importPack(host: RemoteHost, gitDir: string, req: PackRequest, maxBytes = DEFAULT_MAX_PACK_BYTES): Promise<number> {
  const objects = join(gitDir, "objects");
  const quarantine = mkdtempSync(join(objects, "incoming-paseo-"));
  mkdirSync(join(quarantine, "pack"));
  const env = { GIT_OBJECT_DIRECTORY: quarantine, GIT_ALTERNATE_OBJECT_DIRECTORIES: objects, GIT_QUARANTINE_PATH: quarantine };
  const where = `workspace ${req.workspaceId}`;
  try {
    const channel = await host.openAgent();
    const index = gitStream(["--git-dir", gitDir, "index-pack", "--stdin", "--fix-thin"], {
      timeoutMs: IMPORT_TIMEOUT_MS,
      errorClass: "remote",
      env,
    });
    index.stdout.resume();
    let bytes = 0;
    let tooBig = false;
    const onFrame = (f: Frame) => {
      if (tooBig) return;
      if (f.kind === FrameKind.Stdout) {
        bytes += f.payload.length;
        if (bytes > maxBytes) {
          tooBig = true;
          index.kill();
          channel.destroy();
          return;
        }
        if (!index.stdin.write(f.payload)) {
          channel.pauseInput();
          index.stdin.once("drain", () => channel.resumeInput());
        }
      } else if (f.kind === FrameKind.Eof) index.stdin.end();
    };
    channel.on("frame", onFrame);
    try {
      await channel.request(requestFor(host, "workspace.export-objects", { ...req }), IMPORT_TIMEOUT_MS);
      await index.done;
    } catch (err) {
      index.kill();
      if (tooBig) {
        throw new RuntimeError(
          "remote",
          `the host sent more than ${Math.round(maxBytes / 1048576)} MiB of objects for ${where} (more than one pack may carry); nothing was taken`,
        );
      }
      throw err;
    } finally {
      channel.off("frame", onFrame);
      channel.end();
    }
    // receive-pack's connectivity check: every object the wanted commits reach is here now.
    const walk = await gitResult(["--git-dir", gitDir, "rev-list", "--objects", "--stdin", "--not", "--all"], {
      input: req.wants.join("\n") + "\n",
      env,
      okCodes: [128],
      timeoutMs: IMPORT_TIMEOUT_MS,
    });
    if (walk.code !== 0) {
      throw new RuntimeError(
        "remote",
        `the host's objects for ${where} are incomplete (${walk.stderr.trim().split("\n")[0] ?? "missing objects"}); nothing was taken`,
      );
    }
    migrate(quarantine, objects);
    return bytes;
  } finally {
    rmSync(quarantine, { recursive: true, force: true });
  }
}
