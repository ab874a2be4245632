// Starts OpenSSH's sshd for the rig: its config (sshd-config.ts) and log in the rig directory,
// on 127.0.0.1 at a port chosen beforehand, and waits until it accepts connections.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { SSHD_PATH } from "./server-choice.js";
import { localSshdConfig } from "./sshd-config.js";

const START_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 3_000;

export interface RunningSshd {
  pid: number;
  /** sshd's -E log (LogLevel VERBOSE). */
  log: string;
  stop(): Promise<void>;
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: "127.0.0.1", port });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

const check = (configFile: string) =>
  execFileSync(SSHD_PATH, ["-t", "-f", configFile], { stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 });

/** `extraConfig`: sshd_config lines added after the rig's own (e.g. "MaxSessions 10"). */
export async function startSshd(tmpDir: string, port: number, users: string[], extraConfig: string[] = []): Promise<RunningSshd> {
  const configFile = join(tmpDir, "sshd_config");
  const config = (penaltiesOff: boolean) => localSshdConfig(tmpDir, port, users, penaltiesOff) + extraConfig.map((l) => `${l}\n`).join("");
  // OpenSSH >= 9.8 penalises sources whose connections fail pre-auth (our host-key tests do
  // that on purpose); older versions reject the keyword, so keep it only if sshd accepts it.
  writeFileSync(configFile, config(true));
  try {
    check(configFile);
  } catch {
    writeFileSync(configFile, config(false));
    check(configFile);
  }

  const log = join(tmpDir, "sshd.log");
  writeFileSync(log, "");
  chmodSync(log, 0o644);
  const errFile = join(tmpDir, "sshd.stderr");
  const errFd = openSync(errFile, "a");
  const sshd: ChildProcess = spawn(SSHD_PATH, ["-D", "-f", configFile, "-E", log], { stdio: ["ignore", errFd, errFd] });
  let spawnError = "";
  sshd.once("error", (err) => (spawnError = err.message));
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!(await canConnect(port))) {
    if (spawnError || sshd.exitCode !== null || Date.now() > deadline) {
      sshd.kill("SIGKILL");
      throw new Error(`sshd did not start on port ${port}: ${spawnError}${readFileSync(log, "utf8")}${readFileSync(errFile, "utf8")}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  return {
    pid: sshd.pid!,
    log,
    async stop() {
      if (sshd.exitCode !== null || sshd.signalCode !== null) return;
      const exited = new Promise((r) => sshd.once("exit", r));
      sshd.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, STOP_GRACE_MS))]);
      if (sshd.exitCode === null && sshd.signalCode === null) sshd.kill("SIGKILL");
    },
  };
}
