// What the host daemon tests share: the runtime's own processes on the host for a root (through
// host-view.ts), a workspace's end-of-test check that nothing of the runtime runs for it any more, and a
// fault proxy in front of the rig's sshd with runtime options that reach the host through it.
import type { Cleanups } from "./suite.js";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { startDelayProxy, type DelayProxy } from "../../bench/delay-proxy.mjs";
import { stopBroker, targetOf } from "./broker.js";
import type { ExecWorkspace } from "./exec.js";
import { rig, waitFor } from "../rig/rig.js";
import { onHost, requireView } from "./host-view.js";

export interface HostProc {
  pid: number;
  rssKiB: number;
  args: string;
}

/**
 * The runtime's own processes on the host for `root` (daemon, relay, daemon-up, pty-attach: every
 * process of the login user running the installed agent), seen through host-view.ts. Workloads
 * and sshd do not run the agent and are not counted.
 */
export function runtimeProcesses(root: string): HostProc[] {
  const view = requireView();
  const { uid } = view.idsOf(rig().user);
  return view
    .processes()
    .filter((p) => p.uid === uid && p.state !== "Z" && p.argv.join(" ").includes(`${root}/agent/`))
    .map((p) => ({ pid: p.pid, rssKiB: p.rssKiB, args: p.argv.join(" ") }));
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
  // What the daemons said up to here: the logs go with the root, and a daemon that stays is explained by them.
  const logs = (() => {
    try {
      const run = onHost(join(ws.configuredRoot, "run"));
      return readdirSync(run)
        .filter((n) => /^daemon-.*\.log$/.test(n))
        .map((n) => readFileSync(join(run, n), "utf8").split("\n").slice(-15).join("\n"))
        .join("\n");
    } catch (e) {
      return `(no daemon log: ${(e as Error).message})`;
    }
  })();
  const brokerLog = await targetOf(parseRuntimeOptions(ws.options))
    .then((t) => readFileSync(t.paths.log, "utf8").split("\n").slice(-15).join("\n"))
    .catch((e: Error) => `(no broker log: ${e.message})`);
  await ws.cleanup({ destroy: false });
  // A bound against a daemon that never exits; on a loaded machine it has taken over 15 s.
  await waitFor(() => runtimeProcesses(ws.configuredRoot).length === 0, 30_000).catch((err: Error) => {
    const left = runtimeProcesses(ws.configuredRoot).map((p) => `${p.pid} ${p.args}`);
    throw new Error(
      `${err.message}: runtime processes left for ${ws.configuredRoot}: ${left.join(" | ") || "(none now)"}\n${logs}\nbroker log:\n${brokerLog}`,
    );
  });
}

/** A proxy in front of the rig's sshd (`delayMs` each way) and runtime options reaching the host through it. */
export async function throughProxy(
  cleanups: Cleanups,
  extra: Record<string, unknown> = {},
  delayMs = 0,
): Promise<{ proxy: DelayProxy; options: Record<string, unknown>; knownHostsFile: string }> {
  const r = rig();
  const proxy = await startDelayProxy({ targetPort: r.port, delayMs });
  cleanups.push(() => proxy.close());
  const dir = mkdtempSync(join(tmpdir(), "paseo-daemon-kh-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const knownHostsFile = join(dir, "known_hosts");
  writeFileSync(knownHostsFile, r.hostPublicKeys.map((k) => `[127.0.0.1]:${proxy.port} ${k.split(" ").slice(0, 2).join(" ")}\n`).join(""));
  return { proxy, knownHostsFile, options: { host: "127.0.0.1", port: proxy.port, knownHostsFile, ...extra } };
}
