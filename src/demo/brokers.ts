// The runtime shares one SSH connection per host through a detached broker process that outlives
// the operation that started it (src/broker). The demo gives its runtime processes a private
// TMPDIR, so their brokers live in a directory only the demo uses; at the end it asks each of them
// to shut down and waits until the process is gone, so the demo leaves no process behind.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "node:net";
import { readLine, writeLine, type BrokerHello, type BrokerResult } from "../broker/wire.js";

// Generous: on a loaded machine a live broker may answer slowly.
const REPLY_TIMEOUT_MS = 5_000;
const EXIT_WAIT_MS = 5_000;

/** Env for runtime processes whose brokers must live under `tmp` (and nowhere else). */
export function privateBrokerEnv(tmp: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp };
  // The broker prefers XDG_RUNTIME_DIR; without it, it uses <TMPDIR>/paseo-ssh-<uid>.
  delete env.XDG_RUNTIME_DIR;
  return env;
}

function sockets(tmp: string): string[] {
  if (!existsSync(tmp)) return [];
  return readdirSync(tmp)
    .filter((d) => d.startsWith("paseo-ssh-"))
    .flatMap((d) =>
      readdirSync(join(tmp, d))
        .filter((f) => f.endsWith(".sock"))
        .map((f) => join(tmp, d, f)),
    );
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // An exited broker whose parent is gone may linger as a zombie until init reaps it.
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return true;
  }
}

/**
 * Asks the broker on `socket` to shut down; resolves with its pid, or null when nothing listens.
 * No version check: the directory is the demo's own, and a broker from an older build of this
 * installation (rebuilt meanwhile) must be stopped all the same.
 */
async function shutdown(socket: string): Promise<number | null> {
  const sock = connect({ path: socket, allowHalfOpen: true });
  try {
    const connected = await new Promise<boolean>((resolve) => {
      sock.once("connect", () => resolve(true));
      sock.once("error", () => resolve(false));
    });
    if (!connected) return null;
    sock.on("error", () => undefined); // Reported through readLine's timeout or close.
    const hello = await readLine<BrokerHello>(sock, REPLY_TIMEOUT_MS, "hello");
    writeLine(sock, { kind: "shutdown" });
    const result = await readLine<BrokerResult>(sock, REPLY_TIMEOUT_MS, "shutdown result");
    if (!result.ok) throw new Error(`SSH broker ${hello.pid} refused to shut down: ${result.message}`);
    return hello.pid;
  } finally {
    sock.destroy();
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
  while (pids.some(alive)) {
    if (Date.now() > deadline) throw new Error(`SSH broker ${pids.filter(alive).join(", ")} did not exit within ${EXIT_WAIT_MS} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
  return pids.length;
}
