// Helper invocation surface: `describe` (docs/contract.md#helper-commands), the strict argv grammar (#helper-argv) and
// the start-up failure when the cwd has vanished.
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collect, ensureHelperBuilt, HELPER, makeFixture, NODE, runHardError, runHelper, type Fixture } from "../support/helper.js";

let fx: Fixture;
beforeAll(() => {
  ensureHelperBuilt();
  fx = makeFixture();
});
afterAll(() => fx.cleanup());

describe("describe", () => {
  it("prints exactly the protocol v1 description and exits 0", async () => {
    const result = await runHelper(["describe"], { cwd: fx.workspace });
    expect({ code: result.code, signal: result.signal }).toEqual({ code: 0, signal: null });
    expect(result.stdout.toString("utf8")).toBe('{"protocolVersion":1,"version":1,"capabilities":["files","watch","resolve-command"]}\n');
    expect(result.stderr).toBe("");
  });
});

describe("argv grammar", () => {
  const cases: Array<[string[], string]> = [
    [[], "Usage: workspace-helper <command>"],
    [["bogus"], "Unknown workspace-helper command: bogus"],
    [["bogus", "--x", "1"], "Unknown workspace-helper argument: --x"],
    [["describe", "--path", "a"], "Unknown workspace-helper argument: --path"],
    [["watch", "--path", "a"], "Unknown workspace-helper argument: --path"],
    [["fs-stat", "--path"], "--path requires a value"],
    [["fs-stat", "--path", "a", "--path", "b"], "Duplicate workspace-helper argument: --path"],
    [["fs-stat", "--path=a"], "Unknown workspace-helper argument: --path=a"],
    [["fs-stat", "notes.txt"], "Unknown workspace-helper argument: notes.txt"],
    [["fs-read", "--name", "x"], "Unknown workspace-helper argument: --name"],
    [["fs-write", "--path", "a", "--expected-revision"], "--expected-revision requires a value"],
    [["resolve-command"], "--name is required"],
    [["resolve-command", "--name", ""], "--name is required"],
    [["fs-create-entry", "--path", "x"], "Unknown workspace-helper argument: --path"],
  ];
  it.each(cases)("%j fails with one stderr line", async (args, message) => {
    expect(await runHardError(args, { cwd: fx.workspace })).toBe(message);
  });

  it("takes values verbatim, even when they start with --", async () => {
    const result = await runHelper(["fs-stat", "--path", "--path"], { cwd: fx.workspace });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout.toString())).toEqual({ protocolVersion: 1, status: "missing", path: "--path" });
  });
});

describe("start-up", () => {
  it("fails with one line and exit 1 when the cwd no longer exists", async () => {
    const doomed = join(fx.parent, "doomed");
    mkdirSync(doomed);
    const child = spawn("/bin/sh", ["-c", `cd "$1" && rmdir "$1" && exec "$2" "$3" describe`, "sh", doomed, NODE, HELPER], {
      env: {},
      stdio: "pipe",
    });
    child.stdin.end();
    const result = await collect(child);
    expect(result.code).toBe(1);
    expect(result.stdout.length).toBe(0);
    expect(result.stderr).toMatch(/^Workspace directory is not accessible: .*ENOENT.*\n$/);
  });
});
