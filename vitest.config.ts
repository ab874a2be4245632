import { defineConfig } from "vitest/config";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { terminalSources } from "./scripts/terminal-sources.mjs";
import LongFirstSequencer, { holdsLongDrill } from "./test/support/long-first-sequencer.js";

const root = fileURLToPath(new URL(".", import.meta.url));
// PASEO_TEST_LONG=1 (`npm run test:long`, with --tags-filter=long): only the long suite (tests
// declared with longSuite() in test/support/needs.ts, which skips them in any other run), loading
// only the files that hold one.
const longRun = process.env.PASEO_TEST_LONG === "1";
/** needs.ts LONG_TAG (not imported: needs.ts loads the rig). */
const LONG_TAG = "long";
const longFiles = () =>
  readdirSync(`${root}test`, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".test.ts") && holdsLongDrill(`${root}test/${f}`))
    .map((f) => `test/${f}`);

export default defineConfig({
  // Tests run the terminal driver from source: it needs the relay texts the agent build embeds.
  define: terminalSources(root),
  test: {
    include: longRun ? longFiles() : ["test/**/*.test.ts"],
    tags: [{ name: LONG_TAG, description: "a real outage of a minute or more, or a proof repeated at scale: npm run test:long" }],
    globalSetup: ["test/rig/global-setup.ts"],
    // Three workers whatever the machine (CI passes the same): the suites mostly wait on SSH round
    // trips, timers and outages. vitest's own default on two cores (one worker) made the README's
    // `npm test` take 10 min 17 s on a clean clone (embedded server) against about 5 with three.
    maxWorkers: 3,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // The rig's teardown stops the run's brokers and server and waits for their processes to end.
    teardownTimeout: 60_000,
    reporters: ["default", "./test/support/summary-reporter.ts"],
    // Long drills start first, so that with several workers they run beside the rest.
    sequence: { sequencer: LongFirstSequencer },
  },
});
