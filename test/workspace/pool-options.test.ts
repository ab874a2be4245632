// The pool form of the runtime options (src/workspace/pool/pool-options.ts): top-level keys are every
// entry's defaults, each entry is checked as a single host's options are, and every error is one
// line naming the entry's index. The placement score's ordering is pure logic, checked here too.
import { describe, expect, it } from "vitest";
import { parseEntries, parsePoolSpec } from "../../src/workspace/pool/pool-options.js";
import { isPoolOptions } from "../../src/workspace/pool/detect.js";
import { placementScore } from "../../src/workspace/pool/pool.js";
import type { HostLoad } from "../../src/shared/agent-api.js";

function entries(raw: Record<string, unknown>) {
  const spec = parsePoolSpec(raw);
  return parseEntries(spec.defaults, spec.hosts!);
}

const message = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error("did not throw");
};

describe("pool options", () => {
  it("is only a pool with hosts or hostsCommand", () => {
    expect(isPoolOptions({ host: "a" })).toBe(false);
    expect(isPoolOptions({ hosts: [] })).toBe(true);
    expect(isPoolOptions({ hostsCommand: ["x"] })).toBe(true);
    expect(isPoolOptions([])).toBe(false);
  });

  it("applies top-level defaults under each entry's own keys", () => {
    const [a, b] = entries({
      user: "ci",
      port: 2200,
      root: "/srv/paseo",
      hosts: [{ host: "a" }, { host: "b", port: 22, cordoned: true, maxWorkspaces: 3 }],
    });
    expect([a!.options.host, a!.options.port, a!.options.user, a!.options.root]).toEqual(["a", 2200, "ci", "/srv/paseo"]);
    expect([b!.options.port, b!.cordoned, b!.maxWorkspaces, a!.cordoned, a!.maxWorkspaces]).toEqual([22, true, 3, false, null]);
    expect(a!.label).toBe("hosts[0] ci@a:2200");
    expect(a!.id).not.toBe(b!.id);
  });

  it("names the entry's index in every error", () => {
    expect(message(() => entries({ hosts: [{ host: "a" }, { host: "b", port: 0 }] }))).toBe(
      'Invalid runtime option "hosts[1].port": expected an integer 1-65535',
    );
    expect(message(() => entries({ hosts: [{ host: "a" }, { port: 22 }] }))).toMatch(/^Missing runtime option "hosts\[1\]\.host": /);
    expect(message(() => entries({ hosts: [{ host: "a", prot: 1 }] }))).toBe('Unknown runtime option "hosts[0].prot"');
    expect(message(() => entries({ hosts: [{ host: "a", cordoned: "yes" }] }))).toBe(
      'Invalid runtime option "hosts[0].cordoned": expected true or false',
    );
    expect(message(() => entries({ hosts: [{ host: "a", maxWorkspaces: -1 }] }))).toBe(
      'Invalid runtime option "hosts[0].maxWorkspaces": expected an integer 0-100000',
    );
    expect(message(() => entries({ hosts: ["a"] }))).toBe('Invalid runtime option "hosts[0]": expected an object with at least "host"');
    // A default's own error names the top-level key.
    expect(message(() => entries({ port: "x", hosts: [{ host: "a" }] }))).toBe(
      'Invalid runtime option "port": expected an integer 1-65535',
    );
    expect(message(() => entries({ hosts: [{ host: "a" }, { host: "a" }] }))).toBe("hosts[1] is the same host and root as hosts[0]");
  });

  it("keeps host and hosts exclusive and refuses an empty or malformed list", () => {
    expect(message(() => parsePoolSpec({ host: "a", hosts: [{ host: "b" }] }))).toMatch(/"host" and "hosts"\/"hostsCommand" are exclusive/);
    expect(message(() => parsePoolSpec({ hosts: [{ host: "b" }], hostsCommand: ["x"] }))).toBe(
      'Runtime options "hosts" and "hostsCommand" are exclusive',
    );
    expect(message(() => parsePoolSpec({ hosts: [] }))).toBe('Invalid runtime option "hosts": expected a non-empty array of host entries');
    expect(message(() => parsePoolSpec({ hostsCommand: [] }))).toMatch(/^Invalid runtime option "hostsCommand": expected an argv array/);
    expect(message(() => parsePoolSpec({ hostsCommand: { argv: ["x"], shell: true } }))).toBe(
      'Unknown runtime option "hostsCommand.shell"',
    );
    expect(parsePoolSpec({ hostsCommand: ["kubectl", "get", "pods"] }).hostsCommand).toEqual({
      argv: ["kubectl", "get", "pods"],
      timeoutMs: 10_000,
      cacheMs: 10_000,
    });
  });
});

describe("placement score", () => {
  const load = (over: Partial<HostLoad> = {}): HostLoad => ({
    freeBytes: 1e12,
    blockSize: 4096,
    memAvailableBytes: 8 * 1024 ** 3,
    loadPerCpu: 0.5,
    cpus: 8,
    liveExecs: 0,
    workspaces: 0,
    warmCache: false,
    ...over,
  });
  it("orders hosts by workspaces, in-flight creates, execs, load, memory and a warm cache", () => {
    expect(placementScore(load({ workspaces: 2 }), 0)).toBeGreaterThan(placementScore(load({ workspaces: 1 }), 0));
    expect(placementScore(load(), 1)).toBe(placementScore(load({ workspaces: 1 }), 0));
    expect(placementScore(load({ liveExecs: 4 }), 0)).toBeGreaterThan(placementScore(load(), 0));
    expect(placementScore(load({ loadPerCpu: 1 }), 0)).toBeGreaterThan(placementScore(load(), 0));
    expect(placementScore(load({ memAvailableBytes: 256 * 1024 ** 2 }), 0)).toBeGreaterThan(placementScore(load(), 0));
    expect(placementScore(load({ warmCache: true }), 0)).toBeLessThan(placementScore(load(), 0));
    // A warm cache does not outweigh a whole workspace: equal hosts still fill evenly.
    expect(placementScore(load({ warmCache: true, workspaces: 1 }), 0)).toBeGreaterThan(placementScore(load(), 0));
  });
});
