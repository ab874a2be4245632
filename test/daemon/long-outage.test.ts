// Outages far longer than the broker's reconnect window and the wrapper's former wait for a broker
// answer (~60 s), but within reconnectGraceMs (600 s by default), at default options, against the
// real sshd through the fault proxy. The exec must survive with its output exact and its exit code
// kept: re-attached, not restarted, not abandoned. One drill per file, so that they run side by side.
import { describe, it } from "vitest";
import { suite } from "../support/suite.js";
import { faultRig, survivesOutage } from "../support/resume.js";
import { longSuite } from "../support/needs.js";

const cleanups = suite();

const rig = faultRig(cleanups);

describe("an outage longer than a minute, within reconnectGraceMs (default options)", longSuite("a 150 s blackhole"), () => {
  it("a silent 150 s blackhole: the counter's output is exactly 1..N, its exit code kept", async () => {
    // ~2.5 lines/s for 160 s.
    await survivesOutage(rig, "outage-blackhole", (p) => p.blackhole(), { ms: 150_000, n: 400, sleepS: 0.4, code: 3 });
  }, 400_000);
});
