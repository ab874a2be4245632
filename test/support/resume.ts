// What the resumable-exec tests share (test/daemon/resume*.test.ts, long-outage*.test.ts): a counter
// workload and the output it must produce exactly once, the host daemon's log and exec records, and
// workspaces reached through a fresh fault proxy whose outages the test's cleanup ends if the test
// did not.
import type { Cleanups } from "./suite.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { agentBundle } from "../../src/transport/bootstrap.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { execRecordPath, readRecordFile } from "../../src/remote-agent/exec/records.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import type { DelayProxy } from "../../bench/delay-proxy.mjs";
import { brokerStats, targetOf } from "./broker.js";
import { ExecWorkspace, exitOf, sleep, type ExecHandle, type ExecResult } from "./exec.js";
import { finish, throughProxy } from "./host-daemon.js";
import { onHost } from "./host-view.js";

export const PATH = { PATH: "/usr/bin:/bin" };

/** Prints 1..n, one line every `sleepS` seconds, then exits with `code`. */
export function counter(n: number, sleepS: number, code: number): string[] {
  return ["/bin/sh", "-c", `i=1; while [ $i -le ${n} ]; do echo $i; sleep ${sleepS}; i=$((i+1)); done; exit ${code}`];
}

export const lines = (n: number) => Array.from({ length: n }, (_, i) => `${i + 1}\n`).join("");

/** The exec ended with `code`, its stdout exactly 1..n once and in order, nothing on stderr. */
export async function expectOneToN(h: { done: Promise<ExecResult> }, n: number, code: number): Promise<void> {
  const r = await h.done;
  expect(r.stderr).toBe("");
  expect(exitOf(r)).toEqual({ code, signal: null });
  expect(r.stdout.toString()).toBe(lines(n));
}

export function daemonLog(ws: ExecWorkspace): string {
  return readFileSync(onHost(join(ws.configuredRoot, "run", `daemon-${agentBundle().hash}.log`)), "utf8");
}

/**
 * Runs a timed wait; when it fails, the error carries the broker's log and the end of the host
 * daemon's, so a CI run that misses a bound says which step took the time.
 */
export async function explained<T>(ws: ExecWorkspace, wait: () => Promise<T>): Promise<T> {
  try {
    return await wait();
  } catch (err) {
    const tail = (text: string) => text.split("\n").slice(-30).join("\n");
    let broker = "(no broker log)";
    try {
      broker = tail(readFileSync((await targetOf(parseRuntimeOptions(ws.options))).paths.log, "utf8"));
    } catch (e) {
      broker = `(broker log unreadable: ${(e as Error).message})`;
    }
    let daemon = "(no daemon log)";
    try {
      daemon = tail(daemonLog(ws));
    } catch (e) {
      daemon = `(daemon log unreadable: ${(e as Error).message})`;
    }
    const at = new Date().toISOString();
    throw new Error(`${(err as Error).message} (at ${at})\n--- broker log:\n${broker}\n--- daemon log:\n${daemon}`, { cause: err });
  }
}

/** The host's record of an exec (its state, pid, start time), as the host daemon wrote it. */
export function recordOf(ws: ExecWorkspace, h: ExecHandle) {
  return readRecordFile(onHost(execRecordPath(workspaceLayout(ws.configuredRoot, ws.workspaceId), h.execId)));
}

/** Workspaces behind fault proxies, and outages of them, all torn down by `cleanups`. */
export function faultRig(cleanups: Cleanups) {
  return {
    /** A workspace reached through a fresh fault proxy; torn down (nothing left on the host) after the test. */
    async proxiedWorkspace(label: string, extra: Record<string, unknown> = {}) {
      const { proxy, options, knownHostsFile } = await throughProxy(cleanups, extra);
      const ws = new ExecWorkspace(label, options);
      cleanups.push(() => finish(ws));
      await ws.create();
      return { proxy, ws, knownHostsFile };
    },
    /** Starts an outage (`start` returns its end) that the cleanup ends if the test did not. */
    outage(start: () => () => void): () => void {
      const end = start();
      let ended = false;
      const stop = () => {
        if (!ended) end();
        ended = true;
      };
      cleanups.push(stop);
      return stop;
    },
  };
}

/**
 * An outage far longer than a minute but within reconnectGraceMs, at default options: a counter of
 * `n` lines every `sleepS` s (running on through the outage) is cut off after line 20 by `start`
 * for `outageMs`; afterwards its output is exactly 1..n and its exit code `code`, re-attached (not
 * restarted, not abandoned) over a new SSH connection.
 */
export async function survivesOutage(
  rig: ReturnType<typeof faultRig>,
  label: string,
  start: (p: DelayProxy) => () => void,
  outage: { ms: number; n: number; sleepS: number; code: number },
): Promise<void> {
  const { proxy, ws } = await rig.proxiedWorkspace(label);
  const h = ws.start({ argv: counter(outage.n, outage.sleepS, outage.code), env: PATH });
  await h.waitOutput("\n20\n", 30_000);
  const end = rig.outage(() => start(proxy));
  await sleep(outage.ms);
  end();
  await expectOneToN(h, outage.n, outage.code);
  expect(daemonLog(ws)).toMatch(/a detached exec was re-attached/);
  expect(daemonLog(ws)).not.toMatch(/went away during the outage/);
  expect((await brokerStats(parseRuntimeOptions(ws.options)))?.handshakes).toBeGreaterThanOrEqual(2);
}
