// Outages far longer than the broker's reconnect window and the wrapper's wait for a broker answer,
// but within reconnectGraceMs (600 s by default), at default options, against the real sshd through
// the fault proxy: a silent 150 s blackhole and 90 s of refused connections. The exec must survive
// each one with its output exact and its exit code kept, re-attached (not restarted, not reaped).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { agentBundle } from "../../src/transport/bootstrap.js";
import { brokerStats } from "../support/broker.js";
import { ExecWorkspace, exitOf, sleep } from "../support/exec.js";
import { finish, throughProxy } from "../support/host-daemon.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const PATH = { PATH: "/usr/bin:/bin" };

/** Prints 1..n, one line every `sleepS` seconds, then exits with `code`. */
function counter(n: number, sleepS: number, code: number): string[] {
  return ["/bin/sh", "-c", `i=1; while [ $i -le ${n} ]; do echo $i; sleep ${sleepS}; i=$((i+1)); done; exit ${code}`];
}

const lines = (n: number) => Array.from({ length: n }, (_, i) => `${i + 1}\n`).join("");

async function proxiedWorkspace(label: string) {
  const { proxy, options } = await throughProxy(cleanups);
  const ws = new ExecWorkspace(label, options);
  cleanups.push(() => finish(ws));
  await ws.create();
  return { proxy, ws };
}

/** An outage that the cleanup ends if the test did not. */
function outage(start: () => () => void): () => void {
  const end = start();
  let ended = false;
  const stop = () => {
    if (!ended) end();
    ended = true;
  };
  cleanups.push(stop);
  return stop;
}

function daemonLog(ws: ExecWorkspace): string {
  return readFileSync(join(ws.configuredRoot, "run", `daemon-${agentBundle().hash}.log`), "utf8");
}

describe("outages longer than a minute, within reconnectGraceMs (default options)", () => {
  it("a silent 150 s blackhole: the counter's output is exactly 1..N, its exit code kept", async () => {
    const { proxy, ws } = await proxiedWorkspace("outage-blackhole");
    // ~4 lines/s for 160 s: the workload runs on through the whole outage.
    const N = 400;
    const h = ws.start({ argv: counter(N, 0.4, 3), env: PATH });
    await h.waitOutput("\n20\n", 30_000);
    const end = outage(() => proxy.blackhole());
    await sleep(150_000);
    end();
    const r = await h.done;
    expect(r.stderr).toBe("");
    expect(exitOf(r)).toEqual({ code: 3, signal: null });
    expect(r.stdout.toString()).toBe(lines(N));
    expect(daemonLog(ws)).toMatch(/a detached exec was re-attached/);
    expect(daemonLog(ws)).not.toMatch(/went away during the outage/);
    expect((await brokerStats(parseRuntimeOptions(ws.options)))?.handshakes).toBeGreaterThanOrEqual(2);
  }, 400_000);

  it("90 s of refused connections (the links reset, the port closed): the counter's output is exactly 1..N, its exit code kept", async () => {
    const { proxy, ws } = await proxiedWorkspace("outage-refused");
    const N = 240;
    const h = ws.start({ argv: counter(N, 0.5, 4), env: PATH });
    await h.waitOutput("\n20\n", 30_000);
    const end = outage(() => proxy.refuse());
    await sleep(90_000);
    end();
    const r = await h.done;
    expect(r.stderr).toBe("");
    expect(exitOf(r)).toEqual({ code: 4, signal: null });
    expect(r.stdout.toString()).toBe(lines(N));
    expect(daemonLog(ws)).toMatch(/a detached exec was re-attached/);
    expect(daemonLog(ws)).not.toMatch(/went away during the outage/);
    expect((await brokerStats(parseRuntimeOptions(ws.options)))?.handshakes).toBeGreaterThanOrEqual(2);
  }, 400_000);
});
