// resolve-command (docs/contract.md#helper-commands): PATH is the only environment input; without PATH the helper
// falls back to /usr/local/bin:/usr/bin:/bin, after the directory of the Node running it.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureHelperBuilt, makeFixture, NODE, runJson, type Fixture } from "../support/helper.js";

let fx: Fixture;
let tools: string;
const TOOL = "paseo-helper-test-tool";

beforeAll(() => {
  ensureHelperBuilt();
  fx = makeFixture();
  tools = join(fx.parent, "tools");
  mkdirSync(tools);
  writeFileSync(join(tools, TOOL), "#!/bin/sh\n");
  chmodSync(join(tools, TOOL), 0o755);
  writeFileSync(join(tools, "not-executable"), "");
  writeFileSync(fx.path("local.sh"), "#!/bin/sh\n");
  chmodSync(fx.path("local.sh"), 0o755);
});
afterAll(() => fx.cleanup());

const resolve = (name: string, env: NodeJS.ProcessEnv = {}) => runJson(["resolve-command", "--name", name], { cwd: fx.workspace, env });

describe("resolve-command", () => {
  it("finds git through PATH", async () => {
    const git = realpathSync(execFileSync("/bin/sh", ["-c", "command -v git"], { encoding: "utf8" }).trim());
    expect(await resolve("git", { PATH: dirname(git) })).toEqual({ protocolVersion: 1, path: git });
  });

  it("searches only the given PATH (after Node's own directory)", async () => {
    expect(await resolve(TOOL, { PATH: tools })).toEqual({ protocolVersion: 1, path: join(tools, TOOL) });
    expect(await resolve(TOOL, { PATH: "/nonexistent" })).toEqual({ protocolVersion: 1, path: null });
    expect(await resolve("not-executable", { PATH: tools })).toEqual({ protocolVersion: 1, path: null });
    expect(await resolve("definitely-not-a-command-xyz", { PATH: tools })).toEqual({ protocolVersion: 1, path: null });
  });

  it("without PATH returns null for tools outside the default directories and still finds node", async () => {
    expect(await resolve(TOOL)).toEqual({ protocolVersion: 1, path: null });
    expect(await resolve("node")).toEqual({ protocolVersion: 1, path: realpathSync(NODE) });
  });

  it("without PATH falls back to /usr/local/bin:/usr/bin:/bin", async () => {
    expect(await resolve("sh")).toEqual({ protocolVersion: 1, path: realpathSync("/bin/sh") });
  });

  it("resolves names with a slash against the workspace or as absolute paths, without searching", async () => {
    expect(await resolve("./local.sh")).toEqual({ protocolVersion: 1, path: fx.path("local.sh") });
    expect(await resolve(join(tools, TOOL))).toEqual({ protocolVersion: 1, path: join(tools, TOOL) });
    expect(await resolve(`../tools/${TOOL}`)).toEqual({ protocolVersion: 1, path: join(tools, TOOL) });
    expect(await resolve("sub/missing", { PATH: tools })).toEqual({ protocolVersion: 1, path: null });
  });
});
