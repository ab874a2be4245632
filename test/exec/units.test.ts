// Pure pieces of exec, checked without SSH: /proc stat parsing, cwd confinement, PATH lookup,
// fd3 control validation and exit mirroring. Behaviour end to end is proven in the rig suites.
import { mkdirSync, symlinkSync, writeFileSync, chmodSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { parseProcStat } from "../../src/shared/proc-stat.js";
import { findOnPath, resolveWorkloadCwd } from "../../src/remote-agent/exec/launch.js";
import { validateControl, validateEnvelope } from "../../src/exec/controls.js";
import { parseRunRequest } from "../../src/remote-agent/exec/request.js";

describe("parseProcStat", () => {
  it("reads state, ppid, pgid, sid and start time past a command name with spaces and parens", () => {
    const line = "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
    expect(parseProcStat(4242, line)).toEqual({ pid: 4242, state: "S", ppid: 1, pgid: 4242, sid: 4242, startTime: "987654" });
  });
  it("refuses a truncated line", () => {
    expect(parseProcStat(1, "1 (x) S 0 1")).toBeNull();
  });
});

describe("resolveWorkloadCwd", () => {
  const base = suite("all").tmp("exec-cwd-");
  const root = join(base, "root");
  mkdirSync(join(root, "sub"), { recursive: true });
  symlinkSync("..", join(root, "up"));
  symlinkSync("sub", join(root, "inside"));
  const link = join(base, "link");
  symlinkSync(root, link);

  it("accepts the root and subdirectories, following symlinks that stay inside", () => {
    const real = realpathSync(root);
    expect(resolveWorkloadCwd(root, undefined)).toBe(real);
    expect(resolveWorkloadCwd(root, "sub")).toBe(join(real, "sub"));
    expect(resolveWorkloadCwd(root, "inside")).toBe(join(real, "sub"));
    // Judged by where it lands (realpath), as the contract's algorithm does.
    expect(resolveWorkloadCwd(root, "up/root/sub")).toBe(join(real, "sub"));
    expect(resolveWorkloadCwd(root, "sub/..")).toBe(real);
  });
  it("accepts an absolute path inside the root, the root itself included (Paseo's client sends them)", () => {
    const real = realpathSync(root);
    expect(resolveWorkloadCwd(root, real)).toBe(real);
    expect(resolveWorkloadCwd(root, join(real, "sub"))).toBe(join(real, "sub"));
    expect(resolveWorkloadCwd(root, join(root, "inside"))).toBe(join(real, "sub"));
  });
  it.each(["/tmp", "../x", "../does-not-exist", "sub/../..", "a\\b", "up", "up/.", "/nonexistent-dir"])(
    "refuses %s as an escape",
    (cwd) => {
      expect(() => resolveWorkloadCwd(root, cwd)).toThrow(/^Workspace cwd escapes its runtime root$/);
    },
  );
  it("a missing directory inside the root is not an escape", () => {
    expect(() => resolveWorkloadCwd(root, "missing")).toThrow("Workspace cwd does not exist: missing");
    expect(() => resolveWorkloadCwd(root, join(root, "missing"))).toThrow(/^Workspace cwd does not exist/);
    // The root spelled through a symlink, either way round.
    expect(() => resolveWorkloadCwd(realpathSync(root), join(link, "missing/deeper"))).toThrow(/^Workspace cwd does not exist/);
    expect(() => resolveWorkloadCwd(link, join(realpathSync(root), "missing"))).toThrow(/^Workspace cwd does not exist/);
    expect(() => resolveWorkloadCwd(link, join(base, "missing"))).toThrow(/^Workspace cwd escapes its runtime root$/);
  });
});

describe("findOnPath", () => {
  const dir = suite("all").tmp("exec-path-");
  writeFileSync(join(dir, "tool"), "#!/bin/sh\n");
  chmodSync(join(dir, "tool"), 0o755);
  writeFileSync(join(dir, "plain"), "x");

  it("finds executables only, in PATH order", () => {
    expect(findOnPath("tool", `/nonexistent:${dir}`, "/")).toBe(join(dir, "tool"));
    expect(findOnPath("plain", dir, "/")).toBeNull();
    expect(findOnPath("tool", "/usr/bin", "/")).toBeNull();
  });
});

describe("fd3 control validation", () => {
  it("names a bad resize size before any schema detail", () => {
    expect(() => validateControl({ type: "resize", protocolVersion: 1, id: 1, rows: 0, cols: 40 })).toThrow("Invalid PTY size");
    expect(() => validateControl({ type: "resize", protocolVersion: 1, id: 1, rows: 2.5, cols: 40 })).toThrow("Invalid PTY size");
    expect(validateControl({ type: "resize", protocolVersion: 1, id: 3, rows: 41, cols: 99 })).toEqual({
      type: "resize",
      protocolVersion: 1,
      id: 3,
      rows: 41,
      cols: 99,
    });
  });
  it("is strict about unknown keys and versions", () => {
    expect(() => validateControl({ type: "signal", protocolVersion: 1, signal: "SIGTERM", root: "/private" })).toThrow(/unrecognized key/i);
    expect(() => validateControl({ type: "signal", protocolVersion: 2, signal: "SIGTERM" })).toThrow(/expected 1/);
  });
  it("wants the spawn envelope first, with a SHA-256 runtime instance id", () => {
    expect(() => validateEnvelope({ type: "signal", protocolVersion: 1, signal: "SIGTERM" })).toThrow(/spawn envelope/);
    const env = {
      type: "spawn",
      protocolVersion: 1,
      runtimeInstanceId: "abc",
      argv: ["/bin/true"],
      env: { root: "kept" },
      purpose: { kind: "terminal" },
      options: { root: "x" },
      execId: "any id",
      stdio: { kind: "pipes" },
    };
    expect(() => validateEnvelope(env)).toThrow("Runtime instance id must be a SHA-256 identity");
    expect(validateEnvelope({ ...env, runtimeInstanceId: "a".repeat(64) }).env).toEqual({ root: "kept" });
  });
});

describe("agent exec request", () => {
  it("re-checks what the runtime sends", () => {
    const base = { op: "exec.run", root: "/r", workspaceId: "w", owner: "o", execId: "e", argv: ["x"], env: {}, stdio: { kind: "pipes" } };
    expect(parseRunRequest(base).stdio).toEqual({ kind: "pipes" });
    expect(() => parseRunRequest({ ...base, stdio: { kind: "pty", rows: 0, cols: 1 } })).toThrow("Invalid PTY size");
    expect(() => parseRunRequest({ ...base, env: { A: 1 } })).toThrow(/env/);
  });
});
