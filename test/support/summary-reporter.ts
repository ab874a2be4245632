// Ends every run with two plain lines any CI log reader understands without knowing vitest's own
// summary format: `N passed, N failed[, N skipped]`, then which SSH server the suites ran against
// and how many OpenSSH-only cases that skipped (needs-openssh.ts), with how to run them.
import type { Reporter, TestModule } from "vitest/node";
import { NEEDS_OPENSSH } from "../rig/needs-openssh.js";
import type { RigInfo } from "../rig/rig.js";

const FULL_SUITE = "for the full suite: apt-get install openssh-server, or npm run test:compose with Docker";

export function serverLine(
  info: Pick<RigInfo, "server" | "serverBecause" | "user" | "host" | "port"> | null,
  openSshOnlySkipped: number,
): string {
  const skipped = `${openSshOnlySkipped} OpenSSH-only case${openSshOnlySkipped === 1 ? "" : "s"} skipped`;
  switch (info?.server) {
    case "openssh":
      return `SSH server: OpenSSH sshd (${info.serverBecause}); ${skipped}`;
    case "embedded":
      return `SSH server: embedded ssh2 server (${info.serverBecause}); ${skipped}; ${FULL_SUITE}`;
    case "external":
      return `SSH server: external host ${info.user}@${info.host}:${info.port}; ${skipped}`;
    default:
      return `SSH server: none started (the rig did not set up); ${skipped}`;
  }
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0, openSshOnly: 0 };
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const result = test.result();
        if (result.state === "passed") counts.passed++;
        else if (result.state === "failed") counts.failed++;
        else {
          counts.skipped++;
          if (result.state === "skipped" && result.note?.startsWith(NEEDS_OPENSSH)) counts.openSshOnly++;
        }
      }
      // A file that failed to load has no tests but must not read as green.
      if (mod.state() === "failed" && [...mod.children.allTests()].length === 0) counts.failed++;
    }
    const skipped = counts.skipped ? `, ${counts.skipped} skipped` : "";
    const raw = process.env.PASEO_TEST_RIG;
    const info = raw ? (JSON.parse(raw) as RigInfo) : null;
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed${skipped}\n${serverLine(info, counts.openSshOnly)}\n`);
  }
}
