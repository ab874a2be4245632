// Resumable execs through links that go silent for tens of seconds rather than reset: a blackholed
// link, and a sleeping laptop (the Paseo-side processes SIGSTOPped while TCP stays up). Both sides
// must declare the link dead by their keepalives and the exec must come back whole. Apart from
// resume.test.ts because each drill takes about a minute: they run beside the rest of the suite.
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { brokerStats } from "../support/broker.js";
import { sleep } from "../support/exec.js";
import { waitFor } from "../rig/rig.js";
import { PATH, counter, daemonLog, expectOneToN, faultRig, recordOf } from "../support/resume.js";
import { longSuite } from "../support/needs.js";
import { requireView } from "../support/host-view.js";

const cleanups = suite();

const { proxiedWorkspace, outage } = faultRig(cleanups);

describe("resumable execs through silent links", longSuite("a 40 s blackhole and a 60 s stop"), () => {
  it("a 40 s blackhole at keepaliveIntervalMs 5000: both sides declare the link dead, the exec finishes meanwhile, its output and exit arrive after", async () => {
    const { proxy, ws } = await proxiedWorkspace("resume-blackhole", { keepaliveIntervalMs: 5000 });
    const N = 60;
    const h = ws.start({ argv: counter(N, 0.1, 3), env: PATH });
    await h.waitOutput("\n20\n", 30_000);
    const end = outage(() => proxy.blackhole());
    const rec = recordOf(ws, h)!;
    // The daemon notices the silent channel by its own keepalive (3 × 5 s) and detaches the exec…
    await waitFor(() => /channel lost: no answer from the peer for 15000 ms/.test(daemonLog(ws)), 30_000);
    // …which runs to its end during the outage; its output waits in the daemon's replay log.
    await waitFor(() => recordOf(ws, h)?.state === "done", 30_000);
    expect(requireView().isGone(rec.pid!, rec.startTime!)).toBe(true);
    expect(h.output().toString().split("\n").length).toBeLessThan(N);
    await sleep(40_000 - 15_000 - 1000);
    end();
    await expectOneToN(h, N, 3);
  }, 180_000);

  // A sleeping laptop: the Paseo-side processes stop answering while TCP stays up; the host side
  // declares the channel dead (3 keepalive intervals) and keeps the exec detached.
  it("broker and wrapper SIGSTOPped for 60 s, then SIGCONT: the workload ran on, nothing lost", async () => {
    const { ws } = await proxiedWorkspace("resume-sleep", { keepaliveIntervalMs: 2000 });
    const N = 400;
    const h = ws.start({ argv: counter(N, 0.05, 0), env: PATH });
    await h.waitOutput("\n20\n", 30_000);
    const broker = (await brokerStats(parseRuntimeOptions(ws.options)))!.pid;
    const wrapper = h.child.pid!;
    process.kill(broker, "SIGSTOP");
    process.kill(wrapper, "SIGSTOP");
    let stopped = true;
    cleanups.push(() => {
      if (!stopped) return;
      process.kill(broker, "SIGCONT");
      process.kill(wrapper, "SIGCONT");
    });
    await waitFor(() => /channel lost: no answer from the peer for 6000 ms/.test(daemonLog(ws)), 30_000);
    await sleep(60_000 - 6000);
    // The workload ran on (to its end, perhaps) while the Paseo side slept: nothing was reaped.
    expect(recordOf(ws, h)?.state).toMatch(/^(running|done)$/);
    process.kill(broker, "SIGCONT");
    process.kill(wrapper, "SIGCONT");
    stopped = false;
    await expectOneToN(h, N, 0);
  }, 240_000);
});
