// Real OpenSSH servers behind one another, for ProxyJump tests: network namespaces in a line
//   this host -- bastion -- middle -- target
// joined by veth pairs, each namespace running its own sshd. Namespaces do not forward, so the
// middle is reachable only from the bastion and the target only from the middle (a route from
// this host through the bastion exists, and still fails: the tests prove it). Everything is
// named with a random id so concurrent test runs never meet, and is removed by stop(), or by a
// watchdog if the test process dies first.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sshdConfigText } from "../rig/sshd-config.js";
import { NEEDS, firstUnmet, needs } from "./needs.js";

export const SSHD = "/usr/sbin/sshd";

export function jumpRigSkipReason(): string | null {
  const unmet = firstUnmet(
    needs.root("network namespaces"),
    existsSync(SSHD) ? null : `${NEEDS}OpenSSH: ${SSHD} runs in each namespace`,
    needs.command("ip", "iproute2 (ip netns) is not installed"),
    needs.command("nc", "the ProxyCommand case and the readiness probe run nc"),
    needs.command("ssh-keygen", "makes the namespaced sshds' host keys"),
  );
  if (unmet) return unmet;
  try {
    execFileSync("ip", ["netns", "list"], { stdio: "ignore" });
  } catch {
    return `${NEEDS}ip netns: iproute2's network namespaces are not usable here`;
  }
  return null;
}

export interface Sshd {
  /** Namespace it runs in. */
  ns: string;
  address: string;
  port: number;
  /** `host ssh-ed25519 AAAA…` known_hosts line. */
  knownHostsLine: string;
  /** The server's public host key (`ssh-ed25519 AAAA…`). */
  hostKey: string;
  log: string;
  process: ChildProcess;
  /** sshd's log since the rig started, CRLF normalised. */
  logText(): string;
  /** Pids of this sshd and its per-connection children. */
  pids(): number[];
}

export interface JumpRig {
  id: string;
  dir: string;
  /** Reached directly from this host. */
  bastion: Sshd;
  /** Same namespace as the bastion, `AllowTcpForwarding no`. */
  noForwardBastion: Sshd;
  /** A bastion of its own (same namespace), for tests that freeze it. */
  spareBastion: Sshd;
  /** Reachable only from the bastion. */
  middle: Sshd;
  /** Reachable only from the middle. */
  target: Sshd;
  /** Private keys: each server authorizes its own. */
  keys: { bastion: string; middle: string; target: string };
  /** A known_hosts file with every server's key. */
  knownHosts: string;
  stop(): Promise<void>;
}

export const sh = (cmd: string, args: string[]) =>
  execFileSync(cmd, args, { stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 }).toString();

export function keygen(path: string): string {
  sh("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "paseo-jump-rig", "-f", path]);
  return readFileSync(`${path}.pub`, "utf8").trim().split(" ").slice(0, 2).join(" ");
}

export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push(Number(entry), ...childrenOf(Number(entry)));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

// Kills the sshds and deletes the namespaces if the test process dies without calling stop().
export const WATCHDOG = `
const [parent, pids, spaces] = [Number(process.argv[1]), JSON.parse(process.argv[2]), JSON.parse(process.argv[3])];
const { execFileSync } = require("node:child_process");
const alive = (p) => { try { process.kill(p, 0); return true; } catch (e) { return e.code === "EPERM"; } };
setInterval(() => {
  if (!spaces.some((ns) => { try { execFileSync("ip", ["netns", "pids", ns], { stdio: "ignore" }); return true; } catch { return false; } })) process.exit(0);
  if (alive(parent)) return;
  for (const p of pids) { try { process.kill(p, "SIGKILL"); } catch {} }
  for (const ns of spaces) { try { execFileSync("ip", ["netns", "del", ns], { stdio: "ignore" }); } catch {} }
  process.exit(0);
}, 500);
`;

async function waitListening(ns: string, address: string, port: number, proc: ChildProcess, log: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      execFileSync("ip", ["netns", "exec", ns, "nc", "-z", "-w", "1", address, String(port)], { stdio: "ignore" });
      return;
    } catch {
      if (proc.exitCode !== null || Date.now() > deadline)
        throw new Error(`sshd in ${ns} did not listen on ${address}:${port}: ${readFileSync(log, "utf8")}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** What one namespaced sshd needs: its name (file names), namespace, address and port, the authorized key and user. */
export interface SshdSpec {
  name: string;
  ns: string;
  address: string;
  port: number;
  /** The public key it authorizes. */
  pub: string;
  user: string;
  /** More sshd_config lines. */
  extra?: string[];
}

/** Starts sshd in namespace `spec.ns` (files in `dir`), adds it to `started`, and waits until it listens. */
export async function startSshdIn(dir: string, started: Sshd[], spec: SshdSpec): Promise<Sshd> {
  const { name, ns, address, port, pub, user, extra = [] } = spec;
  const hostKeyPath = join(dir, `host_${name}`);
  const hostKey = keygen(hostKeyPath);
  const authorized = join(dir, `authorized_${name}`);
  writeFileSync(authorized, `${pub}\n`, { mode: 0o644 });
  const config = join(dir, `sshd_${name}`);
  const text = (penalties: boolean) =>
    sshdConfigText({
      port,
      listenAddress: address,
      hostKeys: [hostKeyPath],
      pidFile: join(dir, `sshd_${name}.pid`),
      authorizedKeysFile: authorized,
      allowUsers: [user],
      perSourcePenaltiesOff: penalties,
    }) + extra.map((l) => `${l}\n`).join("");
  writeFileSync(config, text(true));
  try {
    sh(SSHD, ["-t", "-f", config]);
  } catch {
    writeFileSync(config, text(false));
  }
  const log = join(dir, `sshd_${name}.log`);
  writeFileSync(log, "");
  const errFd = openSync(`${log}.stderr`, "a");
  const proc = spawn("ip", ["netns", "exec", ns, SSHD, "-D", "-f", config, "-E", log], { stdio: ["ignore", errFd, errFd] });
  const s: Sshd = {
    ns,
    address,
    port,
    hostKey,
    knownHostsLine: `${port === 22 ? address : `[${address}]:${port}`} ${hostKey}`,
    log,
    process: proc,
    logText: () => readFileSync(log, "utf8").replace(/\r\n/g, "\n"),
    pids: () => (proc.pid ? [proc.pid, ...childrenOf(proc.pid)] : []),
  };
  started.push(s);
  await waitListening(ns, address, port, proc, log);
  return s;
}

/** Kills the sshds (and their connections), deletes the namespaces and the rig's directory. */
export function removeRig(dir: string, started: Sshd[], namespaces: string[]): void {
  for (const s of started) {
    for (const pid of s.pids().reverse()) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
  for (const ns of namespaces) {
    try {
      sh("ip", ["netns", "del", ns]);
    } catch {
      // Already gone.
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

export async function startJumpRig(users: { bastion: string; inner: string }): Promise<JumpRig> {
  const id = randomBytes(3).toString("hex");
  const dir = mkdtempSync(join(tmpdir(), `paseo-jump-${id}-`));
  chmodSync(dir, 0o755);
  // A /24 of 10/8 picked at random; the links are /30s inside it.
  const net = `10.${200 + (randomBytes(1)[0]! % 50)}.${randomBytes(1)[0]!}`;
  const spaces = { bastion: `pj${id}b`, middle: `pj${id}m`, target: `pj${id}t` };
  const created: string[] = [];
  const started: Sshd[] = [];
  const stop = async () => removeRig(dir, started, created);
  try {
    for (const ns of Object.values(spaces)) {
      sh("ip", ["netns", "add", ns]);
      created.push(ns);
      sh("ip", ["-n", ns, "link", "set", "lo", "up"]);
    }
    const link = (a: string | null, b: string, subnet: number) => {
      const [ea, eb] = [`pj${id}${subnet}a`, `pj${id}${subnet}b`];
      sh("ip", ["link", "add", ea, ...(a ? ["netns", a] : []), "type", "veth", "peer", "name", eb, "netns", b]);
      const base = subnet * 4;
      sh("ip", [...(a ? ["-n", a] : []), "addr", "add", `${net}.${base + 1}/30`, "dev", ea]);
      sh("ip", ["-n", b, "addr", "add", `${net}.${base + 2}/30`, "dev", eb]);
      sh("ip", [...(a ? ["-n", a] : []), "link", "set", ea, "up"]);
      sh("ip", ["-n", b, "link", "set", eb, "up"]);
      return `${net}.${base + 2}`;
    };
    const bastionAddr = link(null, spaces.bastion, 0);
    const middleAddr = link(spaces.bastion, spaces.middle, 1);
    const targetAddr = link(spaces.middle, spaces.target, 2);
    // This host routes the rest of the rig's addresses through the bastion: only the bastion's
    // refusal to forward keeps the middle and the target unreachable, as on a real network (and
    // nothing leaves through the default route, where a gateway might answer for any address).
    sh("ip", ["route", "add", `${net}.0/24`, "via", bastionAddr]);

    const keys = { bastion: join(dir, "id_bastion"), middle: join(dir, "id_middle"), target: join(dir, "id_target") };
    const pubs = { bastion: keygen(keys.bastion), middle: keygen(keys.middle), target: keygen(keys.target) };
    const start = (name: string, ns: string, address: string, port: number, pub: string, user: string, extra: string[] = []) =>
      startSshdIn(dir, started, { name, ns, address, port, pub, user, extra });
    const bastion = await start("bastion", spaces.bastion, bastionAddr, 22, pubs.bastion, users.bastion);
    const noForwardBastion = await start("noforward", spaces.bastion, bastionAddr, 2222, pubs.bastion, users.bastion, [
      "AllowTcpForwarding no",
    ]);
    const spareBastion = await start("spare", spaces.bastion, bastionAddr, 2223, pubs.bastion, users.bastion);
    const middle = await start("middle", spaces.middle, middleAddr, 22, pubs.middle, users.inner);
    const target = await start("target", spaces.target, targetAddr, 22, pubs.target, users.inner);
    const knownHosts = join(dir, "known_hosts");
    writeFileSync(knownHosts, [bastion, noForwardBastion, spareBastion, middle, target].map((s) => s.knownHostsLine).join("\n") + "\n");
    const pids = started.map((s) => s.process.pid!).filter((p) => p);
    spawn(process.execPath, ["-e", WATCHDOG, String(process.pid), JSON.stringify(pids), JSON.stringify(created)], {
      stdio: "ignore",
      detached: true,
    }).unref();
    return { id, dir, bastion, noForwardBastion, spareBastion, middle, target, keys, knownHosts, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
