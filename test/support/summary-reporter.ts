// Ends every run with plain lines any CI log reader understands without knowing vitest's own
// summary format: `N passed, N failed[, N skipped]`, then which SSH server the suites ran against,
// then every skip reason with its count ("needs nc", "needs root", "needs OpenSSH", …: the labels
// of test/support/needs.ts), so a run on a machine that lacks something says what it did not test.
import type { Reporter, TestCase, TestModule } from "vitest/node";
import type { RigInfo } from "../rig/rig.js";
import { needLabel } from "./needs.js";

const FULL_SUITE = "for the full suite: apt-get install openssh-server, or npm run test:compose with Docker";

/** What npm run test:long leaves out (npm test runs it). */
export const NOT_LONG = "not in the long suite: npm test runs it";

/** A skip that names no reason (a bare ctx.skip() or skipIf): counted so it shows. */
export const NO_REASON = "no reason given";

export function serverLine(info: Pick<RigInfo, "server" | "serverBecause" | "user" | "host" | "port"> | null): string {
  switch (info?.server) {
    case "openssh":
      return `SSH server: OpenSSH sshd (${info.serverBecause})`;
    case "embedded":
      return `SSH server: embedded ssh2 server (${info.serverBecause}); ${FULL_SUITE}`;
    case "external":
      return `SSH server: external host ${info.user}@${info.host}:${info.port}`;
    default:
      return "SSH server: none started (the rig did not set up)";
  }
}

/** `skipped: 12 needs OpenSSH, 3 needs nc, …`, most frequent first; null when nothing was skipped. */
export function skipLine(reasons: ReadonlyMap<string, number>): string | null {
  if (reasons.size === 0) return null;
  const sorted = [...reasons].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return `skipped by reason: ${sorted.map(([label, n]) => `${n} ${label}`).join(", ")}`;
}

/** Which tests skipped without saying why (so the next reader can give them a reason), at most five. */
export function unexplainedLine(names: string[]): string | null {
  if (names.length === 0) return null;
  const more = names.length > 5 ? ` (and ${names.length - 5} more)` : "";
  return `${NO_REASON}: ${names.slice(0, 5).join("; ")}${more}`;
}

/** The reason a skipped test gives: its ctx.skip note, else the need it was declared with (unless()). */
export function skipReason(note: string | undefined, declared: string | undefined): string {
  const reason = note || declared;
  return reason ? needLabel(reason) : NO_REASON;
}

/**
 * 1 for a file that failed while none of its tests did (it failed to load, or a beforeAll/afterAll
 * hook threw): such a file must not read as green. 0 otherwise.
 */
export function unreportedFailure(moduleState: string, testStates: string[]): number {
  return moduleState === "failed" && !testStates.includes("failed") ? 1 : 0;
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    const reasons = new Map<string, number>();
    const unexplained: string[] = [];
    const count = (test: TestCase) => {
      const result = test.result();
      if (result.state === "passed") return counts.passed++;
      if (result.state === "failed") return counts.failed++;
      counts.skipped++;
      // npm run test:long filters out every test without the long tag: say so rather than "no reason".
      const notLong = process.env.PASEO_TEST_LONG === "1" && !test.tags.includes("long") ? NOT_LONG : undefined;
      const label = skipReason(result.state === "skipped" ? result.note : undefined, test.meta().needs ?? notLong);
      reasons.set(label, (reasons.get(label) ?? 0) + 1);
      if (label === NO_REASON) unexplained.push(`${test.module.relativeModuleId} > ${test.fullName}`);
    };
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) count(test);
      counts.failed += unreportedFailure(
        mod.state(),
        [...mod.children.allTests()].map((t) => t.result().state),
      );
    }
    const skipped = counts.skipped ? `, ${counts.skipped} skipped` : "";
    const raw = process.env.PASEO_TEST_RIG;
    const info = raw ? (JSON.parse(raw) as RigInfo) : null;
    const lines = [
      `${counts.passed} passed, ${counts.failed} failed${skipped}`,
      serverLine(info),
      skipLine(reasons),
      unexplainedLine(unexplained),
    ];
    process.stdout.write(`\n${lines.filter((l) => l !== null).join("\n")}\n`);
  }
}
