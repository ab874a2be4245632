// Packaging (docs/contract.md#helper): the helper is one self-contained file that runs from
// anywhere with only Node built-ins, in an empty environment, on node >= 18.
import { builtinModules } from "node:module";
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureHelperBuilt, HELPER, makeFixture, NODE, runHelper, runJson, type Fixture } from "../support/helper.js";

let fx: Fixture;
let bundle: string;
beforeAll(() => {
  ensureHelperBuilt();
  fx = makeFixture();
  bundle = readFileSync(HELPER, "utf8");
  writeFileSync(fx.path("notes.txt"), "before\n");
});
afterAll(() => fx.cleanup());

const DESCRIBE_LINE = '{"protocolVersion":1,"version":1,"capabilities":["files","watch","resolve-command"]}\n';

describe("single-file bundle", () => {
  it("requires nothing but Node built-ins", () => {
    const required = [...bundle.matchAll(/\brequire\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1] as string);
    expect(required.length).toBeGreaterThan(0);
    const builtins = new Set(builtinModules);
    expect(required.filter((name) => !builtins.has(name.replace(/^node:/, "")))).toEqual([]);
  });

  it("uses no API newer than Node 18", () => {
    // Runtime APIs that esbuild's node18 target cannot down-level.
    const newer =
      /\.(toSorted|toReversed|toSpliced|fromAsync|withResolvers|groupBy|isWellFormed|toWellFormed|openAsBlob|getBuiltinModule|styleText|loadEnvFile|globSync|isUtf8)\b|Symbol\.(asyncD|d)ispose/g;
    expect(bundle.match(newer)).toBeNull();
  });

  it("runs as one copied file with no node_modules beside it, in an empty environment", async () => {
    const installed = join(fx.parent, "bin", "paseo-workspace-helper");
    mkdirSync(join(fx.parent, "bin"));
    copyFileSync(HELPER, installed);
    chmodSync(installed, 0o755);
    const described = await runHelper(["describe"], { cwd: fx.workspace, helper: installed, env: {} });
    expect(described.stdout.toString()).toBe(DESCRIBE_LINE);
    expect(await runJson(["fs-stat", "--path", "notes.txt"], { cwd: fx.workspace, helper: installed, env: {} })).toMatchObject({
      status: "ready",
      path: "notes.txt",
      size: 7,
    });
  });

  it("runs by name through a launcher that names Node absolutely (no PATH needed)", async () => {
    const launcher = join(fx.parent, "launcher", "paseo-workspace-helper");
    mkdirSync(join(fx.parent, "launcher"));
    writeFileSync(launcher, `#!/bin/sh\nexec '${NODE}' '${HELPER}' "$@"\n`);
    chmodSync(launcher, 0o755);
    const { spawn } = await import("node:child_process");
    const child = spawn(launcher, ["describe"], { cwd: fx.workspace, env: {}, stdio: "pipe" });
    child.stdin.end();
    const stdout: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
    const code = await new Promise((resolve) => child.on("close", resolve));
    expect(code).toBe(0);
    expect(Buffer.concat(stdout).toString()).toBe(DESCRIBE_LINE);
  });
});
