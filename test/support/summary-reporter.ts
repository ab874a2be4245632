// Ends every run with one plain line, `N passed, N failed[, N skipped]`, that any CI log reader
// understands without knowing vitest's own summary format.
import type { Reporter, TestModule } from "vitest/node";

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") counts.passed++;
        else if (state === "failed") counts.failed++;
        else counts.skipped++;
      }
      // A file that failed to load has no tests but must not read as green.
      if (mod.state() === "failed" && [...mod.children.allTests()].length === 0) counts.failed++;
    }
    const skipped = counts.skipped ? `, ${counts.skipped} skipped` : "";
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed${skipped}\n`);
  }
}
