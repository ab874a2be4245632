// What a test needs from the machine beyond Node, npm, git and the POSIX basics, checked in one
// place: a program (nc, ip, python3, util-linux script, zsh, git-lfs, …), root, OpenSSH's sshd,
// a second login user, the right to mount a tmpfs. Each check returns null when the need is met,
// otherwise a skip note "needs <what>: <why>" that the summary reporter counts by <what>, so a run
// on a machine that lacks something says exactly what it skipped and why (issue 19). Tests either
// skip inside the test (`skipUnless(ctx, …)`) or declare the need on the describe/it
// (`unless(…)`: statically skipped with the reason in the test's meta).
import { execFileSync } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import type { TestContext } from "vitest";
import { NEEDS_OPENSSH, openSshOnly } from "../rig/needs-openssh.js";
import { rig } from "../rig/rig.js";

declare module "vitest" {
  interface TaskMeta {
    /** Why a test declared with `unless(…)` was skipped: a skip note like ctx.skip's. */
    needs?: string;
  }
}

/** null: the need is met; otherwise the skip note. */
export type Need = string | null;

export const NEEDS = "needs ";

/** The reason's label, "needs nc" in "needs nc: not on PATH", for counting. */
export function needLabel(note: string): string {
  const colon = note.indexOf(": ");
  return colon < 0 ? note : note.slice(0, colon);
}

/** Directories the rig's login users search besides PATH (sshd's and the embedded server's default). */
const LOGIN_PATH = ["/usr/local/bin", "/usr/bin", "/bin"];

/** The first executable `name` in `dirs`, or null. */
export function findProgram(name: string, dirs: string[] = searchDirs()): string | null {
  for (const dir of dirs) {
    const path = join(dir, name);
    try {
      accessSync(path, constants.X_OK);
      if (statSync(path).isFile()) return path;
    } catch {
      // Not here.
    }
  }
  return null;
}

function searchDirs(): string[] {
  return (process.env.PATH ?? "").split(delimiter).filter(Boolean);
}

const isRoot = () => process.getuid?.() === 0;

let tmpfsVerdict: Need | undefined;

export const needs = {
  /** A program on this process's PATH (run here, as the runtime runs `ssh` or a test runs `ssh-agent`). */
  command(name: string, why = "not installed (not on PATH)"): Need {
    return findProgram(name) ? null : `${NEEDS}${name}: ${why}`;
  },
  /** A program the rig host's login users find (/usr/local/bin:/usr/bin:/bin: not this process's PATH). */
  hostCommand(name: string, why: string): Need {
    return findProgram(name, LOGIN_PATH) ? null : `${NEEDS}${name}: ${why} (not in ${LOGIN_PATH.join(":")})`;
  },
  /** A server that gives an exec a PTY of its own (sshd started as root, or the embedded server with util-linux script). */
  serverPty(): Need {
    return rig().ptySkipReason;
  },
  /** What this machine needs to own a terminal by `method` (the terminal tests run host code here). */
  terminalMethod(method: "python3" | "script"): Need {
    return method === "python3"
      ? needs.command("python3", "the terminal relay runs on python3")
      : needs.utilLinuxScript("the terminal fallback");
  },
  /** A terminal the host daemon can own: the host's python3 (the relay) or util-linux script. */
  hostTerminal(): Need {
    if (needs.hostCommand("python3", "relay") === null || needs.utilLinuxScript() === null) return null;
    return `${NEEDS}python3 or util-linux script: the host daemon owns a terminal through one of them`;
  },
  /** Some way to give an exec a terminal: one the host daemon owns, else the server's PTY. */
  pty(): Need {
    const server = needs.serverPty();
    if (needs.hostTerminal() === null || server === null) return null;
    return `${NEEDS}a PTY: the host has no python3 or util-linux script, and the server gives none (${server})`;
  },
  /** A program at exactly this path (e.g. the /usr/bin/python3 the rig's users see). */
  file(path: string, why: string): Need {
    try {
      accessSync(path, constants.X_OK);
      return null;
    } catch {
      return `${NEEDS}${path}: ${why}`;
    }
  },
  /** util-linux `script` (not BSD's), the embedded server's and the host's PTY fallback. */
  utilLinuxScript(why = "not installed"): Need {
    const script = findProgram("script");
    if (script) {
      try {
        if (
          /util-linux/.test(execFileSync(script, ["--version"], { encoding: "utf8", timeout: 5_000, stdio: ["ignore", "pipe", "ignore"] }))
        )
          return null;
      } catch {
        // Not util-linux's.
      }
    }
    return `${NEEDS}util-linux script: ${why}`;
  },
  /** Running as root (chown to other users, setpriv, mounts, network namespaces). */
  root(why: string): Need {
    return isRoot() ? null : `${NEEDS}root: ${why}`;
  },
  /** The rig runs OpenSSH's sshd (not the embedded server, not an external host we cannot look into). */
  openssh(why: string): Need {
    return rig().server === "openssh" ? null : openSshOnly(why);
  },
  /** The rig's host is this machine (not PASEO_TEST_SSH_HOST), so the test can look at it directly. */
  localHost(why: string): Need {
    return rig().external ? `${NEEDS}a local rig host: ${why}` : null;
  },
  /** Linux (/proc, statfs, network namespaces, …). */
  linux(why: string): Need {
    return process.platform === "linux" ? null : `${NEEDS}Linux: ${why}`;
  },
  /**
   * Time for a drill of a minute or more (long outages, a sleeping laptop). Declared through
   * longSuite() below, which also tags the test `long`. PASEO_TEST_SKIP_LONG=1 skips them even where
   * the `long` tag is selected (npm run test:long on another server).
   */
  longDrill(what: string): Need {
    return process.env.PASEO_TEST_SKIP_LONG === "1" ? `${NEEDS}time for long drills: ${what} (PASEO_TEST_SKIP_LONG=1)` : null;
  },
  /** The right to mount a tmpfs here (root, and not an unprivileged container). */
  tmpfs(why: string): Need {
    const root = needs.root(why) ?? needs.localHost(why);
    if (root) return root;
    if (tmpfsVerdict === undefined) {
      const probe = mkdtempSync(join(tmpdir(), "paseo-tmpfs-probe-"));
      try {
        execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", probe], { stdio: "ignore", timeout: 10_000 });
        execFileSync("umount", [probe], { stdio: "ignore", timeout: 10_000 });
        tmpfsVerdict = null;
      } catch {
        tmpfsVerdict = `${NEEDS}tmpfs mounts: ${why} (mount -t tmpfs is refused here)`;
      } finally {
        rmSync(probe, { recursive: true, force: true });
      }
    }
    return tmpfsVerdict;
  },
};

/** The first unmet need, or null. */
export function firstUnmet(...list: Need[]): Need {
  return list.find((n) => n !== null) ?? null;
}

/** Skips the running test with the first unmet need's note. */
export function skipUnless(ctx: TestContext, ...list: Need[]): void {
  const unmet = firstUnmet(...list);
  if (unmet) ctx.skip(unmet);
}

/**
 * Options for describe/it: skipped (statically, so no hook of the block runs) with the first unmet
 * need as its reason, which the summary reporter reads from the test's meta.
 */
export function unless(...list: Need[]): { skip: boolean; meta: { needs?: string } } {
  const unmet = firstUnmet(...list);
  return unmet ? { skip: true, meta: { needs: unmet } } : { skip: false, meta: {} };
}

/** The tag of the long suite: `npm run test:long` runs only these tests, `npm test` all others. */
export const LONG_TAG = "long";

/**
 * Options for a describe/it that belongs to the long suite: a real outage of a minute or more, or a
 * test of 20 s and more that repeats a proof at scale (what it proves is proven at small scale in
 * `npm test` too). Tagged `long` (vitest.config.ts: `npm test` filters it out, `npm run test:long`
 * runs only it, CI runs both): without PASEO_TEST_LONG=1 it is skipped with that reason.
 * test/support/long-first-sequencer.ts starts the files that call this first.
 */
export function longSuite(what: string, ...more: Need[]): { tags: string[]; skip: boolean; meta: { needs?: string } } {
  const longRun = process.env.PASEO_TEST_LONG === "1" ? null : `${NEEDS}npm run test:long: ${what} (the long suite)`;
  return { tags: [LONG_TAG], ...unless(longRun, needs.longDrill(what), ...more) };
}

/** Whether a skip note is one of ours (needs.ts or needs-openssh.ts). */
export function isNeedNote(note: string | undefined): note is string {
  return !!note && (note.startsWith(NEEDS) || note.startsWith(NEEDS_OPENSSH));
}
