// `config` prints the entry users paste into Paseo's config.json. Its output is checked against a
// strict schema written here from docs/contract.md#registration (independent of the implementation's
// own), and
// the command it names is spawned exactly as Paseo would: directly, without a shell.
import { describe, expect, it, beforeAll } from "vitest";
import { suite } from "../support/suite.js";
import { z } from "zod";
import { spawnSync } from "node:child_process";
import { realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CLI_PATH, runCli } from "../support/run-cli.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { rig, testRoot } from "../rig/rig.js";

const JsonValue: z.ZodType = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(JsonValue), z.record(z.string(), JsonValue)]),
);
const Entry = z.strictObject({
  type: z.literal("command"),
  label: z.string().min(1).optional(),
  command: z.array(z.string().min(1)).min(1),
  options: z.record(z.string(), JsonValue).optional(),
});
const ConfigSnippet = z.strictObject({ workspaceRuntimes: z.record(z.string().min(1), Entry) });

const s = suite("all");
let tmp: string;
let identityFile: string;
let knownHostsFile: string;
beforeAll(() => {
  tmp = s.tmp("paseo-config-test-");
  identityFile = join(tmp, "id_ed25519");
  knownHostsFile = join(tmp, "known_hosts");
  writeFileSync(identityFile, "not read by config\n", { mode: 0o600 });
  writeFileSync(knownHostsFile, "");
});

async function config(args: string[]) {
  const result = await runCli(["config", ...args]);
  return { ...result, stdout: result.stdout.toString("utf8") };
}

describe("config", () => {
  it("prints a strict workspaceRuntimes entry pointing at this installation", async () => {
    const result = await config([
      "--host",
      "deploy@build-box.example:2222",
      "--identity-file",
      identityFile,
      "--known-hosts-file",
      knownHostsFile,
      "--root",
      "~/.paseo-builds",
      "--label",
      "Build box",
    ]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const snippet = ConfigSnippet.parse(JSON.parse(result.stdout));
    expect(Object.keys(snippet.workspaceRuntimes)).toEqual(["ssh"]);
    const entry = snippet.workspaceRuntimes.ssh!;
    expect(entry).toEqual({
      type: "command",
      label: "Build box",
      command: [realpathSync(CLI_PATH)],
      options: { host: "build-box.example", port: 2222, user: "deploy", identityFile, knownHostsFile, root: "~/.paseo-builds" },
    });
    // The options must be exactly what every operation accepts.
    expect(parseRuntimeOptions(entry.options).host).toBe("build-box.example");
  });

  it("names a command Paseo can spawn directly, without a shell", async () => {
    const result = await config(["--host", "example.test", "--id", "remote-box"]);
    const entry = ConfigSnippet.parse(JSON.parse(result.stdout)).workspaceRuntimes["remote-box"]!;
    expect(entry.label).toBe("SSH example.test");
    expect(entry.options).toEqual({ host: "example.test" });
    const [command, ...leading] = entry.command;
    expect(command!.startsWith("/")).toBe(true);
    const described = spawnSync(command!, [...leading, "describe"], { shell: false, encoding: "utf8", timeout: 20_000 });
    expect(described.stdout).toBe('{"protocolVersion":1,"modes":["pipes","pty"],"reconcile":true}\n');
  });

  it("accepts IPv6 literals in brackets", async () => {
    const result = await config(["--host", "[::1]:2022"]);
    const entry = ConfigSnippet.parse(JSON.parse(result.stdout)).workspaceRuntimes.ssh!;
    expect(entry.options).toEqual({ host: "::1", port: 2022 });
  });

  it.each(["local", "worktree"])("rejects the reserved id %s", async (id) => {
    const result = await config(["--host", "example.test", "--id", id]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toBe(`Workspace runtime id is reserved: ${id}\n`);
  });

  it.each([
    [["--host", "a b"], /^Invalid --host "a b"/],
    [["--host", "example.test:99999"], /^Invalid runtime option "port"/],
    [["--host", "example.test", "--root", "relative/dir"], /^Invalid runtime option "root"/],
    [["--host", "example.test", "--identity-file", "/nonexistent/key"], /^--identity-file \/nonexistent\/key does not exist/],
    [["--host", "example.test", "--label", ""], /^--label must not be empty/],
    [["--host", "example.test", "--doctor", "yes"], /^--doctor expects true or false/],
    [["--host", "example.test", "--port", "22"], /^Unknown flag --port/],
    [["--id", "x"], /^--host is required/],
  ])("rejects bad input %j with one line and nothing on stdout", async (args, message) => {
    const result = await config(args);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trimEnd().split("\n")).toHaveLength(1);
  });

  it("--doctor true checks the host first and reports on stderr only", async () => {
    const r = rig();
    const args = [
      "--host",
      `${r.user}@${r.host}:${r.port}`,
      "--identity-file",
      r.identityFile,
      "--known-hosts-file",
      r.knownHostsFile,
      "--root",
      testRoot(),
    ];
    const ok = await config([...args, "--doctor", "true"]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stderr).toMatch(/host key verified/);
    const entry = ConfigSnippet.parse(JSON.parse(ok.stdout)).workspaceRuntimes.ssh!;
    expect(entry.options).toMatchObject({ host: r.host, port: r.port, user: r.user });

    const strangers = join(tmp, "empty_known_hosts");
    writeFileSync(strangers, "");
    const refused = await config([...args.slice(0, 4), "--known-hosts-file", strangers, "--doctor", "true"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stdout).toBe("");
    expect(refused.stderr).toMatch(/host key/i);
  });
});
