// Outages far longer than the broker's reconnect window and the wrapper's former wait for a broker
// answer (~60 s), but within reconnectGraceMs (600 s by default), at default options, against the
// real sshd through the fault proxy: a silent 150 s blackhole and 90 s of refused connections. The
// exec must survive each one with its output exact and its exit code kept: re-attached, not
// restarted, not abandoned.
import { afterEach, describe, expect, it } from "vitest";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { brokerStats } from "../support/broker.js";
import { sleep } from "../support/exec.js";
import type { DelayProxy } from "../../bench/delay-proxy.mjs";
import { PATH, counter, daemonLog, expectOneToN, faultRig } from "../support/resume.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const { proxiedWorkspace, outage } = faultRig(cleanups);

/**
 * A counter of `n` lines every `sleepS` s (running on through the outage) is cut off after line 20
 * by `start` for `outageMs`; afterwards its output is exactly 1..n and its exit code `code`.
 */
async function survives(label: string, start: (p: DelayProxy) => () => void, outageMs: number, n: number, sleepS: number, code: number) {
  const { proxy, ws } = await proxiedWorkspace(label);
  const h = ws.start({ argv: counter(n, sleepS, code), env: PATH });
  await h.waitOutput("\n20\n", 30_000);
  const end = outage(() => start(proxy));
  await sleep(outageMs);
  end();
  await expectOneToN(h, n, code);
  expect(daemonLog(ws)).toMatch(/a detached exec was re-attached/);
  expect(daemonLog(ws)).not.toMatch(/went away during the outage/);
  expect((await brokerStats(parseRuntimeOptions(ws.options)))?.handshakes).toBeGreaterThanOrEqual(2);
}

describe("outages longer than a minute, within reconnectGraceMs (default options)", () => {
  it("a silent 150 s blackhole: the counter's output is exactly 1..N, its exit code kept", async () => {
    // ~2.5 lines/s for 160 s.
    await survives("outage-blackhole", (p) => p.blackhole(), 150_000, 400, 0.4, 3);
  }, 400_000);

  it("90 s of refused connections (the links reset, the port closed): the counter's output is exactly 1..N, its exit code kept", async () => {
    await survives("outage-refused", (p) => p.refuse(), 90_000, 240, 0.5, 4);
  }, 400_000);
});
