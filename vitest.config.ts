import { defineConfig } from "vitest/config";
import { fileURLToPath } from "node:url";
import { terminalSources } from "./scripts/terminal-sources.mjs";
import LongFirstSequencer from "./test/support/long-first-sequencer.js";

export default defineConfig({
  // Tests run the terminal driver from source: it needs the relay texts the agent build embeds.
  define: terminalSources(fileURLToPath(new URL(".", import.meta.url))),
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/rig/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // The rig's teardown stops the run's brokers and server and waits for their processes to end.
    teardownTimeout: 60_000,
    reporters: ["default", "./test/support/summary-reporter.ts"],
    // Long drills start first, so that with several workers they run beside the rest.
    sequence: { sequencer: LongFirstSequencer },
  },
});
