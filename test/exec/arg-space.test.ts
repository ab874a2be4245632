// The arg-space check agrees with this machine's kernel: what it lets through, execve accepts;
// what it refuses, execve refuses with E2BIG (checked right at both sides of each limit).
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { checkArgSpace, hostArgSpace } from "../../src/remote-agent/exec/arg-space.js";
import { needs, unless } from "../support/needs.js";

const TRUE = "/bin/true";
const launch = { file: TRUE, args: [], argv0: TRUE, cwd: "/" };

function kernelAccepts(env: Record<string, string>): boolean {
  const r = spawnSync(TRUE, [], { env });
  if (r.error) {
    expect((r.error as NodeJS.ErrnoException).code).toBe("E2BIG");
    return false;
  }
  return r.status === 0;
}

function weAccept(env: Record<string, string>): boolean {
  try {
    checkArgSpace(launch, env);
    return true;
  } catch {
    return false;
  }
}

/** Env of 100 KB values plus one filler so the strings and pointers need exactly `need` bytes. */
function envNeeding(need: number): Record<string, string> {
  const env: Record<string, string> = {};
  let used = TRUE.length + 1 + TRUE.length + 1 + 8; // file, argv[0] and its pointer
  for (let i = 0; ; i++) {
    const name = `V${String(i).padStart(4, "0")}`;
    const overhead = name.length + 2 + 8;
    const left = need - used - overhead;
    if (left <= 100_000) {
      env[name] = "x".repeat(left);
      return env;
    }
    env[name] = "x".repeat(100_000);
    used += 100_000 + overhead;
  }
}

describe("arg space check (Linux)", unless(needs.linux("the host's argument space as Linux counts it")), () => {
  const space = hostArgSpace();

  it("one string: MAX_ARG_STRLEN bytes with its NUL pass, one more byte is refused by both", () => {
    const fits = { V: "x".repeat(space.perString! - 3) };
    const over = { V: "x".repeat(space.perString! - 2) };
    expect([weAccept(fits), kernelAccepts(fits)]).toEqual([true, true]);
    expect([weAccept(over), kernelAccepts(over)]).toEqual([false, false]);
  });

  it("all strings and pointers: at the limit pass, just above it are refused by both", () => {
    const fits = envNeeding(space.total!);
    const over = envNeeding(space.total! + 1);
    expect([weAccept(fits), kernelAccepts(fits)]).toEqual([true, true]);
    expect([weAccept(over), kernelAccepts(over)]).toEqual([false, false]);
  });
});
