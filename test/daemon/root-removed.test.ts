// A root removed while an exec is detached (its link down, its wrapper gone, so no client-gone
// notice can come): the host daemon can no longer be reached by anyone (a re-attach would reach
// whichever daemon holds the socket path), so it reaps the detached exec and exits within seconds
// instead of keeping the workload and itself alive for reconnectGraceMs (ten minutes by default).
import { rmSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { sleep } from "../support/exec.js";
import { runtimeProcesses } from "../support/host-daemon.js";
import { waitFor } from "../rig/rig.js";
import { PATH, daemonLog, faultRig, recordOf } from "../support/resume.js";
import { requireView } from "../support/host-view.js";

const cleanups = suite();
const { proxiedWorkspace, outage } = faultRig(cleanups);

describe("a root removed under a detached exec", () => {
  it("the daemon reaps the workload and exits within 10 s, not at the end of the reconnect grace", async () => {
    const { proxy, ws } = await proxiedWorkspace("root-removed", { keepaliveIntervalMs: 1000, connectTimeoutMs: 1000 });
    const h = ws.start({ argv: ["/bin/sh", "-c", "sleep 83 & echo ready; wait"], env: PATH });
    await h.waitOutput("ready\n");
    const rec = recordOf(ws, h)!;
    outage(() => proxy.blackhole());
    await waitFor(() => /an exec's stream was lost .*detached, waiting up to 600000 ms/.test(daemonLog(ws)), 30_000);
    h.child.kill("SIGKILL");
    await h.done;
    await sleep(1500);
    // Detached and waiting: the grace (ten minutes) has not run out.
    expect(requireView().isGone(rec.pid!, rec.startTime!)).toBe(false);
    expect(runtimeProcesses(ws.configuredRoot).length).toBeGreaterThan(0);
    rmSync(requireView().path(ws.configuredRoot), { recursive: true, force: true, maxRetries: 50, retryDelay: 100 });
    const t0 = Date.now();
    await waitFor(() => requireView().isGone(rec.pid!, rec.startTime!) && runtimeProcesses(ws.configuredRoot).length === 0, 10_000);
    console.log(`workload reaped and daemon gone ${Date.now() - t0} ms after the root was removed`);
  }, 90_000);
});
