// A long transfer shows it is alive: the pack's bytes are counted as they leave, with an
// `objects-sending` progress mark (bytes so far) at most once a second, so a create moving
// gigabytes says how far it got. The bytes pass through unchanged.
import { Transform } from "node:stream";
import type { GitStream } from "../shared/git-exec.js";
import type { Progress } from "./progress.js";

const MARK_EVERY_MS = 1000;

/** The same pack, its output counted into `progress`. */
export function withTransferProgress(pack: GitStream, progress: Progress): GitStream {
  let sent = 0;
  let lastMark = performance.now();
  const stdout = new Transform({
    readableHighWaterMark: 1024 * 1024,
    transform(chunk: Buffer, _enc, done) {
      sent += chunk.length;
      if (performance.now() - lastMark >= MARK_EVERY_MS) {
        lastMark = performance.now();
        progress.mark("objects-sending", { bytes: sent });
      }
      done(null, chunk);
    },
  });
  pack.stdout.on("error", (err) => stdout.destroy(err));
  pack.stdout.pipe(stdout);
  return { ...pack, stdout };
}
