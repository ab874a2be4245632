// The broker directory is trusted only when it is ours and closed to others: a squatted name is
// skipped (the same fixed alternative for every process of ours), a too-open one is tightened.
import { chmodSync, chownSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { brokerDir, brokerVersion, socketPathFits } from "../../src/broker/common/broker-paths.js";
import { brokerTarget } from "../../src/broker/client/connect-broker.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { needs, unless } from "../support/needs.js";

const s = suite();
let base = "";
beforeEach(() => {
  base = s.tmp("paseo-broker-dir-");
  const savedXdg = process.env.XDG_RUNTIME_DIR;
  process.env.XDG_RUNTIME_DIR = base;
  s.push(() => {
    if (savedXdg === undefined) delete process.env.XDG_RUNTIME_DIR;
    else process.env.XDG_RUNTIME_DIR = savedXdg;
  });
});

describe("broker directory", () => {
  it("is used only where its sockets' paths fit the OS's Unix socket address (104 bytes on macOS, 108 on Linux)", () => {
    // macOS's per-user TMPDIR, as the broker directory under it.
    const macTmp = "/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/paseo-ssh-501";
    expect(socketPathFits(macTmp, "darwin")).toBe(true);
    // 73 + 1 + 29 bytes: 103 fits macOS exactly, 104 does not (its NUL needs the last byte).
    const edge = `/${"d".repeat(72)}`;
    expect(socketPathFits(edge, "darwin")).toBe(true);
    expect(socketPathFits(`${edge}x`, "darwin")).toBe(false);
    expect(socketPathFits(`${edge}x`, "linux")).toBe(true);
    expect(socketPathFits(`${edge}xxxxx`, "linux")).toBe(false);
    // Multi-byte characters count as bytes.
    expect(socketPathFits(`/${"é".repeat(37)}`, "darwin")).toBe(false);
  });

  it("is none (connect in-process) when every candidate's sockets would be too long", () => {
    process.env.XDG_RUNTIME_DIR = join(base, "x".repeat(100));
    mkdirSync(process.env.XDG_RUNTIME_DIR);
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = process.env.XDG_RUNTIME_DIR;
    try {
      expect(brokerDir()).toBeNull();
    } finally {
      if (savedTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = savedTmp;
    }
  });

  it("is created 0700 under XDG_RUNTIME_DIR", () => {
    const dir = brokerDir();
    expect(dir).toBe(join(base, "paseo-ssh"));
    expect(statSync(dir!).mode & 0o777).toBe(0o700);
  });

  it("tightens a directory of ours that others could enter", () => {
    mkdirSync(join(base, "paseo-ssh"));
    chmodSync(join(base, "paseo-ssh"), 0o777);
    expect(brokerDir()).toBe(join(base, "paseo-ssh"));
    expect(statSync(join(base, "paseo-ssh")).mode & 0o777).toBe(0o700);
  });

  it("skips a directory owned by someone else", unless(needs.root("gives the directory to another user (chown)")), () => {
    mkdirSync(join(base, "paseo-ssh"), { mode: 0o700 });
    chownSync(join(base, "paseo-ssh"), 65534, 65534);
    expect(brokerDir()).toBe(join(base, "paseo-ssh.1"));
    expect(statSync(join(base, "paseo-ssh.1")).uid).toBe(0);
  });
});

describe("broker socket path", () => {
  it("is not used when it would be too long to bind: the caller connects in-process", () => {
    const deep = join(base, "x".repeat(120));
    mkdirSync(deep, { mode: 0o700 });
    process.env.XDG_RUNTIME_DIR = deep;
    const options = parseRuntimeOptions({ host: "127.0.0.1" });
    expect(brokerTarget(options)).toBeNull();
    process.env.XDG_RUNTIME_DIR = base;
    expect(brokerTarget(options)?.paths.socket.startsWith(join(base, "paseo-ssh"))).toBe(true);
  });
});

describe("broker version built into the operations", () => {
  it("is the hash of the dist/broker.js built with them, in every bundle that asks for it", () => {
    const dist = join(import.meta.dirname, "../../dist");
    const expected = brokerVersion(join(dist, "broker.js")).split("-")[1]!;
    const bundles = [...readFileSync(join(dist, "cli.js"), "latin1").matchAll(/loadOperationBundle\("(ops\/[^"]+)"\)/g)].map((m) => m[1]!);
    const asking = bundles.filter((file) => readFileSync(join(dist, file), "latin1").includes("function builtBrokerVersion()"));
    expect(asking.length).toBeGreaterThan(5);
    for (const file of asking) {
      const source = readFileSync(join(dist, file), "latin1");
      const embedded = /function builtBrokerVersion\(\) \{\s*return [^\n]*"([0-9a-f]{16})"/.exec(source)?.[1];
      expect({ file, embedded }).toEqual({ file, embedded: expected });
    }
  });
});
