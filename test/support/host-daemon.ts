// What the host daemon tests share: the runtime's own processes on the host for a root (from
// /proc), a workspace's end-of-test check that nothing of the runtime runs for it any more, and a
// fault proxy in front of the rig's sshd with runtime options that reach the host through it.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { startDelayProxy, type DelayProxy } from "../../bench/delay-proxy.mjs";
import { stopBroker } from "./broker.js";
import type { ExecWorkspace } from "./exec.js";
import { rig, waitFor } from "../rig/rig.js";

export interface HostProc {
  pid: number;
  rssKiB: number;
  args: string;
}

function uidOf(user: string): number {
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${user}:`));
  return Number(line?.split(":")[2] ?? -1);
}

/**
 * The runtime's own processes on the host for `root` (daemon, relay, daemon-up, pty-attach: every
 * process of the login user running the installed agent), read from /proc. Workloads and sshd
 * do not run the agent and are not counted.
 */
export function runtimeProcesses(root: string): HostProc[] {
  const uid = uidOf(rig().user);
  const found: HostProc[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, "utf8");
      if (Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) !== uid || /^State:\s+Z/m.test(status)) continue;
      const args = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ").trim();
      if (!args.includes(`${root}/agent/`)) continue;
      found.push({ pid: Number(name), rssKiB: Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0), args });
    } catch {
      // ended during the scan
    }
  }
  return found;
}

export function daemonsOf(root: string): HostProc[] {
  return runtimeProcesses(root).filter((p) => / daemon( |$)/.test(p.args));
}

/** Relays carrying a connection's link to the daemon (`agent.cjs relay`: a server that forwards no Unix sockets). */
export function relaysOf(root: string): HostProc[] {
  return runtimeProcesses(root).filter((p) => / relay( |$)/.test(p.args));
}

/**
 * Destroys the workspace, stops the broker (asking its daemon to retire), removes the root (any
 * other daemon of it then exits) and checks that nothing of the runtime runs for it any more.
 */
export async function finish(ws: ExecWorkspace): Promise<void> {
  await ws.lifecycle("destroy").catch(() => undefined);
  await stopBroker(parseRuntimeOptions(ws.options), { retireDaemon: true });
  await ws.cleanup();
  await waitFor(() => runtimeProcesses(ws.configuredRoot).length === 0, 15_000);
}

/** A proxy in front of the rig's sshd and runtime options reaching the host through it. */
export async function throughProxy(
  cleanups: Array<() => Promise<void> | void>,
  extra: Record<string, unknown> = {},
): Promise<{ proxy: DelayProxy; options: Record<string, unknown>; knownHostsFile: string }> {
  const r = rig();
  const proxy = await startDelayProxy({ targetPort: r.port, delayMs: 0 });
  cleanups.push(() => proxy.close());
  const dir = mkdtempSync(join(tmpdir(), "paseo-daemon-kh-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const knownHostsFile = join(dir, "known_hosts");
  writeFileSync(knownHostsFile, r.hostPublicKeys.map((k) => `[127.0.0.1]:${proxy.port} ${k.split(" ").slice(0, 2).join(" ")}\n`).join(""));
  return { proxy, knownHostsFile, options: { host: "127.0.0.1", port: proxy.port, knownHostsFile, ...extra } };
}
