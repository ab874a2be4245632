// A build box whose loopback is not ours: one network namespace joined to this host by a veth
// pair, running its own sshd (test/support/jump-rig.ts's machinery), so a server a workspace starts
// on the host's 127.0.0.1 or ::1 is unreachable from here unless something forwards it. A second
// sshd in the same namespace refuses TCP forwarding (AllowTcpForwarding no). Named with a random id
// and removed by stop(), or by a watchdog if the test process dies first.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WATCHDOG, jumpRigSkipReason, keygen, removeRig, sh, startSshdIn, type Sshd } from "./jump-rig.js";

export interface NetnsHost {
  ns: string;
  sshd: Sshd;
  /** Same namespace and key, `AllowTcpForwarding no`. */
  noForward: Sshd;
  /** Runtime options reaching `sshd` (merge over the rig's). */
  options: Record<string, unknown>;
  /** Runs a command in the namespace (as root). */
  exec(args: string[]): string;
  stop(): Promise<void>;
}

/** Null when namespaced sshds can run here; otherwise the skip note (never a failure). */
export const netnsHostSkipReason = jumpRigSkipReason;

export async function startNetnsHost(user: string): Promise<NetnsHost> {
  const id = randomBytes(3).toString("hex");
  const dir = mkdtempSync(join(tmpdir(), `paseo-netns-${id}-`));
  chmodSync(dir, 0o755);
  const ns = `pn${id}h`;
  const net = `10.${200 + (randomBytes(1)[0]! % 50)}.${randomBytes(1)[0]!}`;
  const started: Sshd[] = [];
  let created = false;
  const stop = async () => removeRig(dir, started, created ? [ns] : []);
  try {
    sh("ip", ["netns", "add", ns]);
    created = true;
    sh("ip", ["-n", ns, "link", "set", "lo", "up"]);
    const [here, there] = [`pn${id}a`, `pn${id}b`];
    sh("ip", ["link", "add", here, "type", "veth", "peer", "name", there, "netns", ns]);
    sh("ip", ["addr", "add", `${net}.1/30`, "dev", here]);
    sh("ip", ["-n", ns, "addr", "add", `${net}.2/30`, "dev", there]);
    sh("ip", ["link", "set", here, "up"]);
    sh("ip", ["-n", ns, "link", "set", there, "up"]);
    const key = join(dir, "id_host");
    const pub = keygen(key);
    const address = `${net}.2`;
    const sshd = await startSshdIn(dir, started, { name: "host", ns, address, port: 22, pub, user });
    const noForward = await startSshdIn(dir, started, {
      name: "nofwd",
      ns,
      address,
      port: 2222,
      pub,
      user,
      extra: ["AllowTcpForwarding no"],
    });
    const knownHostsFile = join(dir, "known_hosts");
    writeFileSync(knownHostsFile, `${sshd.knownHostsLine}\n${noForward.knownHostsLine}\n`);
    const pids = started.map((s) => s.process.pid!).filter((p) => p);
    spawn(process.execPath, ["-e", WATCHDOG, String(process.pid), JSON.stringify(pids), JSON.stringify([ns])], {
      stdio: "ignore",
      detached: true,
    }).unref();
    return {
      ns,
      sshd,
      noForward,
      options: { host: address, port: 22, user, identityFile: key, knownHostsFile, sshConfig: false },
      exec: (args) => sh("ip", ["netns", "exec", ns, ...args]),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
