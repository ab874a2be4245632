// Runtime option validation (pure logic): defaults, `~` expansion, one-line errors naming the key.
import { homedir, userInfo } from "node:os";
import { describe, expect, it } from "vitest";
import { RuntimeError } from "../../src/shared/errors.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";

function message(raw: unknown): string {
  try {
    parseRuntimeOptions(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(RuntimeError);
    expect((err as RuntimeError).errorClass).toBe("input");
    expect((err as RuntimeError).exitCode).toBe(2);
    return (err as Error).message;
  }
  throw new Error("options were accepted");
}

describe("parseRuntimeOptions", () => {
  it("fills defaults", () => {
    // toMatchObject: later features add keys with their own defaults.
    expect(parseRuntimeOptions({ host: "example.com" })).toMatchObject({
      host: "example.com",
      port: 22,
      user: userInfo().username,
      knownHostsFile: `${homedir()}/.ssh/known_hosts`,
      root: "~/.paseo-ssh",
      connectTimeoutMs: 10_000,
      keepaliveIntervalMs: 15_000,
    });
  });

  it("expands ~ in local paths and keeps remote ones as configured", () => {
    const o = parseRuntimeOptions({
      host: "h",
      identityFile: "~/.ssh/id_x",
      knownHostsFile: "~/kh",
      root: "/srv/paseo",
      remoteNode: "/opt/node/bin/node",
    });
    expect(o.identityFile).toBe(`${homedir()}/.ssh/id_x`);
    expect(o.knownHostsFile).toBe(`${homedir()}/kh`);
    expect(o.root).toBe("/srv/paseo");
    expect(o.remoteNode).toBe("/opt/node/bin/node");
  });

  it.each([
    [{ host: "h", port: 0 }, 'Invalid runtime option "port": expected an integer 1-65535'],
    [{ host: "h", port: 70000 }, 'Invalid runtime option "port": expected an integer 1-65535'],
    [{ host: "h", port: "22" }, 'Invalid runtime option "port": expected an integer 1-65535'],
    [{ host: "h", port: 22.5 }, 'Invalid runtime option "port": expected an integer 1-65535'],
    [{ host: "h", foo: 1 }, 'Unknown runtime option "foo"'],
    [
      {},
      'Missing runtime option "host": expected a non-empty host name, address or ssh_config alias without spaces, commas, a leading - or shell metacharacters',
    ],
    [
      { host: "" },
      'Invalid runtime option "host": expected a non-empty host name, address or ssh_config alias without spaces, commas, a leading - or shell metacharacters',
    ],
    [
      { host: "h", root: "relative/dir" },
      'Invalid runtime option "root": expected an absolute path or one starting with "~/" (no newline, NUL, backslash or !)',
    ],
    [
      { host: "h", root: "/a\nb" },
      'Invalid runtime option "root": expected an absolute path or one starting with "~/" (no newline, NUL, backslash or !)',
    ],
    [
      { host: "h", root: "~/a\0b" },
      'Invalid runtime option "root": expected an absolute path or one starting with "~/" (no newline, NUL, backslash or !)',
    ],
    [
      { host: "h", remoteNode: "node" },
      'Invalid runtime option "remoteNode": expected the absolute path of node on the remote host (no newline, NUL, backslash or !)',
    ],
    [
      { host: "h", connectTimeoutMs: -1 },
      'Invalid runtime option "connectTimeoutMs": expected an integer number of milliseconds 100-600000',
    ],
    [
      { host: "h", user: 5 },
      'Invalid runtime option "user": expected a non-empty user name without spaces, a leading - or shell metacharacters',
    ],
  ])("rejects %j", (raw, expected) => {
    const msg = message(raw);
    expect(msg).toBe(expected);
    expect(msg).not.toContain("\n");
  });

  it("forwardPorts: true by default, false, or the host ports to forward; anything else refused naming the key", () => {
    expect(parseRuntimeOptions({ host: "h" }).forwardPorts).toBe(true);
    expect(parseRuntimeOptions({ host: "h", forwardPorts: false }).forwardPorts).toBe(false);
    expect(parseRuntimeOptions({ host: "h", forwardPorts: [3000, 5173] }).forwardPorts).toEqual([3000, 5173]);
    for (const bad of [[], [0], [65_536], [80.5], ["3000"], "yes", 3000, null]) {
      expect(message({ host: "h", forwardPorts: bad })).toMatch(
        /^Invalid runtime option "forwardPorts".*expected true, false, or a non-empty array/,
      );
    }
  });

  it("rejects non-objects", () => {
    expect(message(null)).toBe("Runtime options must be a JSON object");
    expect(message([])).toBe("Runtime options must be a JSON object");
  });
});
