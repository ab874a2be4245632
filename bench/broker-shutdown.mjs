// The bench's runtime processes keep their brokers in a private TMPDIR. At the end of a round the
// bench asks each broker there to shut down the way the demo does, with its host daemon retired
// (the daemon would otherwise stay until its idle exit, minutes later), before anything is killed:
// what is still on the host 10 s later is then a real leftover, not a daemon waiting to idle out.
import { existsSync, readdirSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";

const REPLY_TIMEOUT_MS = 5_000;

/** Broker sockets under the directories a runtime with TMPDIR=tmp (no XDG_RUNTIME_DIR) may use. */
function sockets(tmp) {
  const base = join(tmp, `paseo-ssh-${process.getuid()}`);
  return [base, ...[1, 2, 3, 4].map((i) => `${base}.${i}`)]
    .filter((dir) => existsSync(dir))
    .flatMap((dir) =>
      readdirSync(dir)
        .filter((f) => f.endsWith(".sock"))
        .map((f) => join(dir, f)),
    );
}

/** One line-based exchange: read the hello, send shutdown, read the result. Resolves with an error text or null. */
function shutdown(path) {
  return new Promise((resolve) => {
    const sock = connect({ path });
    let buf = "";
    let lines = 0;
    const done = (err) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(err);
    };
    const timer = setTimeout(() => done(`${path}: no answer within ${REPLY_TIMEOUT_MS} ms`), REPLY_TIMEOUT_MS);
    sock.on("error", (e) => done(e.code === "ENOENT" || e.code === "ECONNREFUSED" ? null : `${path}: ${e.message}`));
    sock.on("data", (chunk) => {
      buf += chunk.toString("utf8");
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (++lines === 1) sock.write(`${JSON.stringify({ kind: "shutdown", retireDaemon: true })}\n`);
        else return done(JSON.parse(line).ok === true ? null : `${path}: ${line}`);
      }
    });
    sock.on("end", () => done(lines < 2 ? `${path}: closed before answering` : null));
  });
}

/** Asks every broker under `tmp` to shut down and retire its host daemon; resolves with the errors (texts). */
export async function shutdownBrokers(tmp) {
  const errors = await Promise.all(sockets(tmp).map(shutdown));
  return errors.filter((e) => e !== null);
}
