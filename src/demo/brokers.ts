// The runtime shares one SSH connection per host through a detached broker process that outlives
// the operation that started it (src/broker). The demo gives its runtime processes a private
// TMPDIR, so their brokers live in a directory only the demo uses; at the end it asks each of them
// to shut down (and its host daemon to exit as soon as nothing runs on it) and waits until the
// broker is gone, so the demo leaves no process behind.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { BrokerResultSchema, readLine, writeLine } from "../broker/common/wire.js";
import { dial } from "../broker/common/dial.js";
import { brokerDirCandidates } from "../broker/common/broker-paths.js";
import { isGone } from "../shared/proc-stat.js";
import { sleep } from "../shared/async.js";

// Generous: on a loaded machine a live broker may answer slowly.
const REPLY_TIMEOUT_MS = 5_000;
const EXIT_WAIT_MS = 5_000;

/** Env for runtime processes whose brokers must live under `tmp` (and nowhere else). */
export function privateBrokerEnv(tmp: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp };
  // The broker prefers XDG_RUNTIME_DIR; without it, its directory is under TMPDIR.
  delete env.XDG_RUNTIME_DIR;
  return env;
}

/** Broker sockets in the directories a runtime with privateBrokerEnv(tmp) may have used. */
function sockets(tmp: string): string[] {
  return brokerDirCandidates({ tmp })
    .filter((dir) => existsSync(dir))
    .flatMap((dir) =>
      readdirSync(dir)
        .filter((f) => f.endsWith(".sock"))
        .map((f) => join(dir, f)),
    );
}

/**
 * Asks the broker on `socket` to shut down; resolves with its pid, or null when nothing listens.
 * No version check: the directory is the demo's own, and a broker from an older build of this
 * installation (rebuilt meanwhile) must be stopped all the same.
 */
async function shutdown(socket: string): Promise<number | null> {
  const r = await dial(socket, null, REPLY_TIMEOUT_MS);
  if (r.state === "absent") return null;
  if (r.state === "mismatch") throw new Error(`SSH broker at ${socket} did not answer: ${r.detail}`);
  try {
    writeLine(r.sock, { kind: "shutdown", retireDaemon: true });
    const result = await readLine(r.sock, BrokerResultSchema, REPLY_TIMEOUT_MS, "shutdown result");
    if (!result.ok) throw new Error(`SSH broker ${r.hello.pid} refused to shut down: ${result.message}`);
    return r.hello.pid;
  } finally {
    r.sock.destroy();
  }
}

/** Shuts down every broker under `tmp`; resolves with how many stopped, rejects if one would not. */
export async function stopPrivateBrokers(tmp: string): Promise<number> {
  const pids: number[] = [];
  for (const socket of sockets(tmp)) {
    const pid = await shutdown(socket);
    if (pid !== null) pids.push(pid);
  }
  const deadline = Date.now() + EXIT_WAIT_MS;
  const alive = (pid: number) => !isGone(pid);
  while (pids.some(alive)) {
    if (Date.now() > deadline) throw new Error(`SSH broker ${pids.filter(alive).join(", ")} did not exit within ${EXIT_WAIT_MS} ms`);
    await sleep(25);
  }
  return pids.length;
}
