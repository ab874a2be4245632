// probeTerminalSupport: which way this host can own a terminal (python3, util-linux script, none),
// probed for real once and cached per agent directory keyed by the programs found. Also the
// oldest python the relay supports (3.6), when this machine has one, runs the A21 probe.
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeTerminalSupport } from "../../src/remote-agent/terminal/host-terminals.js";
import { bundleHarness } from "./bundle.js";
import { removeScratch, runA21, scratch, scriptOnlyPath } from "./scenarios.js";
import { needs, unless } from "../support/needs.js";

const PYTHON36 = "/root/.pyenv/versions/3.6.15/bin/python3.6";
const python3 = unless(needs.terminalMethod("python3"));
const usrBinScript = unless(needs.file("/usr/bin/script", "the script-only search path links it"));
const usrBinPython3 = unless(needs.file("/usr/bin/python3", "the cached probe runs /usr/bin/python3"));
const python36 = unless(needs.file(PYTHON36, "the oldest python the relay supports"));

afterAll(removeScratch);

describe("terminal support probe", () => {
  let harness: string;
  beforeAll(async () => {
    harness = await bundleHarness();
  });
  const probeInChild = (args: Record<string, unknown>) =>
    JSON.parse(execFileSync(process.execPath, [harness, "probe", JSON.stringify(args)], { encoding: "utf8", timeout: 30_000 })) as Record<
      string,
      unknown
    >;

  it("picks python3 where it is on the path, and reports the interpreter and its version", python3, async () => {
    const s = await probeTerminalSupport(scratch("agent"));
    expect(s.method).toBe("python3");
    if (s.method !== "python3") return;
    expect(s.version).toMatch(/^3\.\d+\.\d+$/);
    expect(execFileSync(s.python, ["-c", "import sys; print(sys.executable)"], { encoding: "utf8" }).trim()).toBe(s.python);
  });

  it("picks script when python3 is hidden, and none when neither is found (then the caller keeps sshd's pty)", usrBinScript, async () => {
    const script = await probeTerminalSupport(scratch("agent"), { searchPath: scriptOnlyPath() });
    expect(script.method).toBe("script");
    const empty = scratch("empty");
    const none = await probeTerminalSupport(scratch("agent"), { searchPath: empty });
    expect(none).toEqual({ method: "none", reason: "no python3; no script" });
  });

  it("a python3 that cannot run the relay is skipped with its reason; script is used instead", usrBinScript, async () => {
    const bin = scriptOnlyPath();
    writeFileSync(join(bin, "python3"), "#!/bin/sh\necho 'python too old' >&2\nexit 1\n");
    chmodSync(join(bin, "python3"), 0o755);
    const s = await probeTerminalSupport(scratch("agent"), { searchPath: bin });
    expect(s.method).toBe("script");
  });

  it(
    "the result is cached in the agent directory: a later process answers from the file, a different program set probes again",
    usrBinPython3,
    async () => {
      const agentDir = scratch("agent");
      const first = probeInChild({ agentDir, searchPath: "/usr/bin" });
      expect(first).toMatchObject({ method: "python3", python: "/usr/bin/python3" });
      const cacheFile = join(agentDir, "terminal-support.json");
      const cache = JSON.parse(readFileSync(cacheFile, "utf8")) as { support: { version: string } };
      // A later call must not run python again: it returns what the file says.
      cache.support.version = "from-cache";
      writeFileSync(cacheFile, JSON.stringify(cache));
      expect(probeInChild({ agentDir, searchPath: "/usr/bin" })).toMatchObject({ method: "python3", version: "from-cache" });
      // Another python3 (the key is the set of programs found): probed again.
      const bin = scratch("bin");
      symlinkSync("/usr/bin/python3", join(bin, "python3"));
      const again = probeInChild({ agentDir, searchPath: bin });
      expect(again.method).toBe("python3");
      expect(again.version).not.toBe("from-cache");
    },
  );

  it("python 3.6 runs the relay: A21 as with any other python3", python36, async () => {
    const bin = scratch("bin");
    symlinkSync(PYTHON36, join(bin, "python3"));
    const s = await probeTerminalSupport(scratch("agent"), { searchPath: bin });
    expect(s).toMatchObject({ method: "python3", version: "3.6.15" });
    if (s.method === "none") return;
    const cwd = scratch("cwd");
    const r = await runA21(s, cwd);
    expect(r.beforeInput).toContain(`${cwd}|true|80x24|λ`);
    expect(r.resized).toBe(true);
    expect(r.output).toContain("|héllo|103x39");
    expect(r.exit).toEqual({ code: 6, signal: null });
  });
});
