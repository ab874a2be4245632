// The run's last lines: skip reasons counted by what was missing ("needs nc", "needs root", …),
// a skip that names none counted as such, and the server line.
import { describe, expect, it } from "vitest";
import { NO_REASON, serverLine, skipLine, skipReason, unexplainedLine, unreportedFailure } from "../support/summary-reporter.js";
import { needLabel } from "../support/needs.js";

describe("summary lines", () => {
  it("label a skip by what it needs, from its note or the need it was declared with", () => {
    expect(needLabel("needs nc: not installed (not on PATH)")).toBe("needs nc");
    expect(needLabel("needs OpenSSH: counts logins in sshd's log")).toBe("needs OpenSSH");
    expect(skipReason("needs root: chowns", undefined)).toBe("needs root");
    expect(skipReason(undefined, "needs python3: the relay")).toBe("needs python3");
    expect(skipReason("", undefined)).toBe(NO_REASON);
  });

  it("count reasons, most frequent first, ties by name", () => {
    const reasons = new Map([
      ["needs root", 2],
      ["needs OpenSSH", 12],
      ["needs nc", 2],
    ]);
    expect(skipLine(reasons)).toBe("skipped by reason: 12 needs OpenSSH, 2 needs nc, 2 needs root");
    expect(skipLine(new Map())).toBeNull();
  });

  it("name the tests that skipped without a reason, five at the most", () => {
    expect(unexplainedLine([])).toBeNull();
    expect(unexplainedLine(["a.test.ts > x"])).toBe(`${NO_REASON}: a.test.ts > x`);
    const seven = Array.from({ length: 7 }, (_, i) => `f.test.ts > t${i}`);
    expect(unexplainedLine(seven)).toBe(`${NO_REASON}: ${seven.slice(0, 5).join("; ")} (and 2 more)`);
  });

  it("name the server and why it was chosen", () => {
    const facts = { user: "u", host: "127.0.0.1", port: 22 };
    expect(serverLine({ ...facts, server: "embedded", serverBecause: "PASEO_TEST_SERVER=embedded" })).toMatch(
      /^SSH server: embedded ssh2 server \(PASEO_TEST_SERVER=embedded\); for the full suite: /,
    );
    expect(serverLine({ ...facts, server: "openssh", serverBecause: "PASEO_TEST_SERVER=openssh" })).toBe(
      "SSH server: OpenSSH sshd (PASEO_TEST_SERVER=openssh)",
    );
    expect(serverLine(null)).toBe("SSH server: none started (the rig did not set up)");
  });

  it("count a file that failed with no failed test (load error, failing hook) as one failure", () => {
    expect(unreportedFailure("failed", [])).toBe(1);
    expect(unreportedFailure("failed", ["passed", "passed", "skipped"])).toBe(1);
    expect(unreportedFailure("failed", ["passed", "failed"])).toBe(0);
    expect(unreportedFailure("passed", ["passed"])).toBe(0);
  });
});
