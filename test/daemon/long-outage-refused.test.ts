// Outages far longer than the broker's reconnect window and the wrapper's former wait for a broker
// answer (~60 s), but within reconnectGraceMs (600 s by default), at default options, against the
// real sshd through the fault proxy. The exec must survive with its output exact and its exit code
// kept: re-attached, not restarted, not abandoned. One drill per file, so that they run side by side (the other is long-outage.test.ts).
import { describe, it } from "vitest";
import { suite } from "../support/suite.js";
import { faultRig, survivesOutage } from "../support/resume.js";
import { longSuite } from "../support/needs.js";

const cleanups = suite();

const rig = faultRig(cleanups);

describe(
  "refused connections for longer than a minute, within reconnectGraceMs (default options)",
  longSuite("90 s of refused connections"),
  () => {
    it("90 s of refused connections (the links reset, the port closed): the counter's output is exactly 1..N, its exit code kept", async () => {
      await survivesOutage(rig, "outage-refused", (p) => p.refuse(), { ms: 90_000, n: 240, sleepS: 0.5, code: 4 });
    }, 400_000);
  },
);
