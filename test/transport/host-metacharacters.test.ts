// A `host` or `user` with shell metacharacters is refused as OpenSSH (9.6 and later) refuses them
// on its command line: through the fallback parser (no ssh binary on PATH) a config's
// `ProxyCommand nc %h %p` would otherwise hand `$(…)` to the local shell. Driven through the built
// executable with a PATH that holds node and sh but no ssh.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { findSsh } from "../../src/transport/ssh-config/ssh-g.js";
import { lifecycleRequest, runCli } from "../support/run-cli.js";

// Lower case throughout: ssh lowercases a host name before %h expands it.
const dir = join("/tmp", `paseo-metachar-${randomBytes(4).toString("hex")}`);
mkdirSync(dir);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("shell metacharacters in host and user", () => {
  it("are refused as an input error before a ProxyCommand of the fallback parser could run them", async () => {
    const bin = join(dir, "bin");
    mkdirSync(bin);
    for (const tool of ["sh", "nc"]) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
    symlinkSync(process.execPath, join(bin, "node"));
    expect(findSsh(bin)).toBeNull();
    const cfg = join(dir, "config");
    writeFileSync(cfg, "Host *\n  ProxyCommand nc %h %p\n  User %r\n");
    const env = { ...process.env, PATH: bin, SHELL: "/bin/sh", PASEO_SSH_NO_BROKER: "1" };
    const cases: Array<[Record<string, string>, string]> = [
      // No whitespace (already refused): a redirection alone creates the marker.
      [{ host: `$(>${dir}/ran-host)` }, "ran-host"],
      [{ host: `h\`>${dir}/ran-tick\`` }, "ran-tick"],
      [{ host: "h", user: `$(>${dir}/ran-user)` }, "ran-user"],
      [{ host: `h;>${dir}/ran-semi` }, "ran-semi"],
    ];
    for (const [options, marker] of cases) {
      const result = await runCli(["inspect", "--workspace-id", "w"], {
        stdin: lifecycleRequest({ ...options, sshConfig: cfg, connectTimeoutMs: 2000, broker: false }),
        env,
      });
      expect(existsSync(join(dir, marker)), marker).toBe(false);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toMatch(/^Invalid runtime option "(host|user)": .*shell metacharacters/);
    }
  });

  it.each([
    [{ host: "-oProxyCommand=x" }, "host"],
    [{ host: "a|b" }, "host"],
    [{ host: "a,b" }, "host"],
    [{ host: "h\u0007" }, "host"],
    [{ host: "h", user: "-x" }, "user"],
    [{ host: "h", user: "a'b" }, "user"],
    [{ host: "h", user: "a$b" }, "user"],
    [{ host: "h", user: "u\u0001" }, "user"],
  ])("refuses %j", (raw, key) => {
    expect(() => parseRuntimeOptions(raw)).toThrow(new RegExp(`^Invalid runtime option "${key}"`));
  });

  it.each([
    { host: "user-host.example.com" },
    { host: "[::1]" },
    { host: "10.0.0.1" },
    { host: "h", user: "first.last_2-x" },
    { host: "h", user: "dom@in" },
  ])("accepts %j", (raw) => {
    expect(parseRuntimeOptions(raw).host).toBe(raw.host);
  });
});
