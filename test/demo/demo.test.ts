// `paseo-ssh-runtime demo` end to end, as a user runs it: every step must pass (PTY included where
// util-linux `script` exists), and afterwards nothing may be left: no file in the private TMPDIR
// the demo and every runtime process it spawned used, no local process naming the demo's
// workspace or temp dirs, no change to the repository it ran in, and on a real host (the rig) no
// workspace directory and no process under the demo's remote root.
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { spawn, spawnSync, execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CLI_PATH } from "../support/run-cli.js";
import { rig, uniqueTestRoot } from "../rig/rig.js";
import { needs, skipUnless } from "../support/needs.js";

const repoRoot = join(import.meta.dirname, "..", "..");
const utilLinuxScript = /util-linux/.test(spawnSync("script", ["--version"], { encoding: "utf8" }).stdout ?? "");
const STEPS = [
  "describe",
  "create",
  "committed files only",
  "git log -1",
  "exact env",
  "pty",
  "workspace helper",
  "pause",
  "resume",
  "destroy",
  "local cleanup",
];

interface DemoRun {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  tmp: string;
}

const s = suite();

function runDemo(args: string[], cwd: string, onOutput?: (stdout: string, kill: (s: NodeJS.Signals) => void) => void): Promise<DemoRun> {
  const tmp = s.tmp("paseo-demo-test-");
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(process.execPath, [CLI_PATH, "demo", ...args], {
      cwd,
      env: { ...process.env, TMPDIR: tmp },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
      onOutput?.(stdout, (signal) => child.kill(signal));
    });
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`demo did not finish within 80 s:\n${stdout}\n${stderr}`));
    }, 80_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started, tmp });
    });
  });
}

function stepLines(stdout: string): Map<string, string> {
  const lines = new Map<string, string>();
  for (const line of stdout.split("\n")) {
    const match = /^ {2}(\S) (.+?) +\d+ ms {2}/.exec(line);
    if (match) lines.set(match[2]!, match[1]!);
  }
  return lines;
}

function expectAllPassed(run: DemoRun, ptyExpected: boolean): void {
  const context = `${run.stdout}\n${run.stderr}`;
  const marks = stepLines(run.stdout);
  expect([...marks.keys()], context).toEqual(STEPS);
  for (const step of STEPS) expect(marks.get(step), `${step}\n${context}`).toBe(step === "pty" && !ptyExpected ? "-" : "✓");
  expect(run.stdout, context).toMatch(
    ptyExpected ? /^demo: 11 passed, 0 failed in \d+\.\d s$/m : /^demo: 10 passed, 0 failed, 1 skipped in \d+\.\d s$/m,
  );
  expect(run.code, context).toBe(0);
  expect(run.stderr).toBe("");
}

/**
 * Local processes (other than this test's own) whose command line or environment mentions any of
 * `needles`: the environment catches the runtime's brokers, whose argv names no workspace but
 * whose TMPDIR is the demo's.
 */
function localProcessesMentioning(needles: string[]): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    if (Number(pid) === process.pid) continue;
    // A process may be gone meanwhile, or belong to a user whose environment we may not read.
    const proc = (file: string) => {
      try {
        return readFileSync(`/proc/${pid}/${file}`, "utf8");
      } catch {
        return undefined;
      }
    };
    const cmdline = proc("cmdline")?.replace(/\0/g, " ");
    if (cmdline === undefined || /^\d+ \(.*\) Z /.test(proc("stat") ?? "")) continue; // gone, or exited awaiting reaping
    const environ = proc("environ") ?? "";
    if (needles.some((n) => cmdline.includes(n) || environ.includes(n))) found.push(`${pid}: ${cmdline}`);
  }
  return found;
}

async function expectNoLocalLeftovers(run: DemoRun, created = true): Promise<void> {
  const workspaceId = /paseo-demo-[0-9a-f]{12}/.exec(run.stdout)?.[0];
  if (created) expect(workspaceId).toBeDefined();
  const needles = [run.tmp, ...(workspaceId ? [workspaceId] : [])];
  // The demo returned after its cleanup. Allow a short grace: processes it killed need reaping, and
  // a broker that lost its socket to a newer one (judged hung on a loaded machine) exits on its own
  // at its next idle check.
  const deadline = Date.now() + 5_000;
  while (localProcessesMentioning(needles).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  expect(localProcessesMentioning(needles)).toEqual([]);
  expect(readdirSync(run.tmp)).toEqual([]);
}

/**
 * Run on the remote host with the root (relative to home) on stdin: prints the root's workspace
 * directories, "--", then every process whose command line contains the root. Node instead of
 * ls/pgrep: node is there wherever the runtime works, procps may not be.
 */
const REMOTE_LEFTOVERS = [
  'const fs = require("fs"); const dir = fs.readFileSync(0, "utf8").trim();',
  'let ws = []; try { ws = fs.readdirSync(require("os").homedir() + "/" + dir + "/workspaces"); } catch {}',
  'for (const w of ws) console.log(w); console.log("--");',
  'for (const p of fs.readdirSync("/proc")) { if (!/^[0-9]+$/.test(p) || Number(p) === process.pid) continue;',
  'let c; try { c = fs.readFileSync("/proc/" + p + "/cmdline", "utf8").split(String.fromCharCode(0)).join(" "); } catch { continue; }',
  'if (c.includes(dir)) console.log(p + ": " + c); }',
].join(" ");

// The demo alone takes ~10 s; with the whole suite running in parallel it can take several times that.
const DEMO_TEST_MS = 90_000;

/** The demo's flags for the rig's host, with this known_hosts file and remote root. */
function hostArgs(knownHostsFile: string, root: string): string[] {
  const r = rig();
  return [
    "--host",
    `${r.user}@${r.host}:${r.port}`,
    "--identity-file",
    r.identityFile,
    "--known-hosts-file",
    knownHostsFile,
    "--root",
    root,
  ];
}

describe("demo", () => {
  it(
    "passes every step against the embedded server from this repository and leaves nothing behind",
    async () => {
      const run = await runDemo([], repoRoot);
      expectAllPassed(run, utilLinuxScript);
      // A CI checkout may have a detached HEAD: the demo then says so and uses its sample repository.
      const onBranch = spawnSync("git", ["symbolic-ref", "-q", "HEAD"], { cwd: repoRoot }).status === 0;
      if (onBranch) expect(run.stdout).toContain(`from ${repoRoot} (`);
      else expect(run.stdout).toMatch(/^note: .*checked out on a branch; using a generated sample repository/m);
      await expectNoLocalLeftovers(run);
      // The untracked file it checked is either one that was already there or its own, now removed.
      const untracked = /untracked (\S+) absent/.exec(run.stdout)![1]!;
      const ownMarker = untracked.startsWith(".paseo-demo-untracked-");
      expect(existsSync(join(repoRoot, untracked))).toBe(!ownMarker);
      expect(readdirSync(repoRoot).filter((f) => f.startsWith(".paseo-demo-untracked-"))).toEqual([]);
    },
    DEMO_TEST_MS,
  );

  it(
    "generates a sample repository when run outside a git repository",
    async () => {
      const outside = s.tmp("paseo-demo-cwd-");
      const run = await runDemo([], outside);
      expectAllPassed(run, utilLinuxScript);
      expect(run.stdout).toContain("from generated sample repo (main@");
      expect(run.stdout).toContain("untracked .env absent");
      await expectNoLocalLeftovers(run);
      expect(readdirSync(outside)).toEqual([]);
    },
    DEMO_TEST_MS,
  );

  it(
    "runs the same tour against a real sshd with --host and removes its remote workspace",
    async (ctx) => {
      skipUnless(ctx, needs.hostCommand("python3", "the demo's PTY step runs on a terminal the host daemon owns"));
      const r = rig();
      const root = uniqueTestRoot("demo");
      const run = await runDemo(hostArgs(r.knownHostsFile, root), repoRoot);
      expectAllPassed(run, true);
      // The rig's host has python3: the demo says its PTY step ran on a terminal the daemon owns.
      expect(run.stdout).toMatch(/^ {2}✓ pty .*; terminal owned by the host daemon \(python3\)$/m);
      await expectNoLocalLeftovers(run);
      // Over plain ssh: no workspace directory and no process left under the demo's root. The root
      // arrives on stdin so that no command line (ssh's, the remote shell's) contains it. The
      // broker's parked agents end when sshd notices the closed connection: allow a short grace.
      const leftovers = () =>
        execFileSync(
          "ssh",
          [
            "-p",
            String(r.port),
            "-i",
            r.identityFile,
            "-o",
            `UserKnownHostsFile=${r.knownHostsFile}`,
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            `${r.user}@${r.host}`,
            `node -e '${REMOTE_LEFTOVERS}'`,
          ],
          { encoding: "utf8", timeout: 20_000, input: `${root.replace(/^~\//, "")}\n` },
        )
          .split("\n")
          .filter(Boolean);
      let remote = leftovers();
      for (const deadline = Date.now() + 3_000; remote.length > 1 && Date.now() < deadline; remote = leftovers()) {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(remote).toEqual(["--"]);
    },
    DEMO_TEST_MS,
  );

  it(
    "fails with the cause, skips what depends on it, still cleans up, when the host key is unknown",
    async () => {
      const r = rig();
      const strangers = s.tmp("paseo-demo-kh-");
      writeFileSync(join(strangers, "known_hosts"), "");
      const run = await runDemo(hostArgs(join(strangers, "known_hosts"), uniqueTestRoot("demo")), repoRoot);
      const marks = stepLines(run.stdout);
      expect(marks.get("describe"), run.stdout).toBe("✓");
      expect(marks.get("create"), run.stdout).toBe("✗");
      expect(run.stdout).toMatch(/✗ create .*host key/i);
      for (const step of ["committed files only", "git log -1", "pty", "pause", "resume"]) expect(marks.get(step)).toBe("-");
      // destroy is still attempted (it cannot reach the host either), then the local cleanup runs.
      expect(marks.get("destroy")).toBe("✗");
      expect(marks.get("local cleanup")).toBe("✓");
      expect(run.stdout).toMatch(/^demo: 2 passed, 2 failed, 7 skipped in /m);
      expect(run.code).toBe(1);
      await expectNoLocalLeftovers(run, false);
    },
    DEMO_TEST_MS,
  );

  it(
    "on SIGINT finishes the running step, skips the rest, destroys the workspace and cleans up",
    async () => {
      let sent = false;
      const run = await runDemo([], repoRoot, (stdout, kill) => {
        if (!sent && /✓ create /.test(stdout)) {
          sent = true;
          kill("SIGINT");
        }
      });
      const marks = stepLines(run.stdout);
      expect(marks.get("create"), run.stdout).toBe("✓");
      expect(run.stdout).toContain("skipped: interrupted");
      expect(marks.get("resume"), run.stdout).toBe("-");
      expect(marks.get("destroy"), run.stdout).toBe("✓");
      expect(marks.get("local cleanup"), run.stdout).toBe("✓");
      expect(run.stderr).toMatch(/SIGINT received; cleaning up/);
      expect(run.code).toBe(130);
      await expectNoLocalLeftovers(run);
    },
    DEMO_TEST_MS,
  );

  it("refuses host options without --host", async () => {
    const run = await runDemo(["--root", "~/.x"], repoRoot);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/need --host/);
  });
});
