// The host daemon holds on to the root it was started in, and runs only helper and terminal relay
// files it verified. An attacker who can write a directory above the root after the daemon started
// (the parent's mode changed later) renames the root away and puts their own in its place, linking
// workspaces/, run/, cache/ and tmp/ back to the real ones and planting agent/<hash>/helper.cjs: the
// next exec must be refused, not run their file as the login user. And a helper or relay file
// rewritten by anyone (a workload of another workspace) is never run as it is. The host is this
// machine: the test (root) plays the attacker, their files owned by the rig's second user.
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  lchownSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { agentBundle } from "../../src/transport/bootstrap.js";
import { rig, waitFor } from "../rig/rig.js";
import { ExecWorkspace, exitOf } from "../support/exec.js";
import { NEEDS, needs, unless } from "../support/needs.js";

const uidOf = (user: string) => Number(execFileSync("id", ["-u", user]).toString().trim());
const HELPER_DESCRIBE = '{"protocolVersion":1,"version":1,"capabilities":["files","watch","resolve-command"]}';

/** A script for `interpreter` that leaves `proof` behind when run. */
function proofScript(interpreter: "node" | "python", proof: string): string {
  return interpreter === "node"
    ? `require("fs").writeFileSync(${JSON.stringify(proof)}, String(process.getuid()));\n`
    : `open(${JSON.stringify(proof)}, "w").write("ran")\n`;
}

/** Pids of processes whose command line names `file`. */
function processesRunning(file: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").includes(file)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** The relay started ahead of the next PTY exec: only where the host has python3 (pty.ts); none otherwise. */
async function waitForRelay(file: string): Promise<number[]> {
  if (needs.hostCommand("python3", "relay") !== null) return [];
  for (let i = 0; i < 200; i++) {
    const pids = processesRunning(file);
    if (pids.length > 0) return pids;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no relay started ahead (${file}) within 10 s`);
}

async function killRelaysOf(file: string, pids: number[]): Promise<void> {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // ended by itself
    }
  }
  // SIGKILL is delivered asynchronously: /proc may list a killed relay for a moment (CI-like load
  // saw one right after the kill), so the check waits, bounded, for every one to be gone.
  const left = () => processesRunning(file).filter((p) => pids.includes(p) && !isZombie(p));
  await waitFor(() => left().length === 0, 5000).catch(() => undefined);
  expect(left()).toEqual([]);
}

const isZombie = (pid: number) => {
  try {
    return /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return true;
  }
};

const gate = unless(
  needs.localHost("plants files on the host directly"),
  needs.root("plays another local user who can write the root's parent"),
  rig().noisyUser ? null : `${NEEDS}a second login user on the rig (OpenSSH rig as root)`,
);

describe("a root swapped or tampered with after the daemon verified it", gate, () => {
  const s = suite("all");
  // Made only where the block runs: its body is collected even when the block is skipped.
  const base = gate.skip ? "/nonexistent" : s.tmp("/srv/paseo-root-swap-");
  const shared = join(base, "shared");
  const root = join(shared, "r");
  const agentDir = join(root, "agent", agentBundle().hash);
  // Where a planted file, run as whoever, can leave its proof.
  const proof = join(base, "proofs", "pwned");
  const ws = new ExecWorkspace("root-swap", { root, brokerIdleMs: 300_000 });
  // Newest first: the workspace goes before the directory that holds its root.
  s.push(() => ws.cleanup());

  beforeAll(async () => {
    chmodSync(base, 0o755);
    mkdirSync(join(base, "proofs"));
    chmodSync(join(base, "proofs"), 0o777);
    mkdirSync(shared, { mode: 0o755 });
    chmodSync(shared, 0o755);
    // The root's own directory, made for the login user by an administrator.
    mkdirSync(root, { mode: 0o700 });
    chownSync(root, uidOf(rig().user), uidOf(rig().user));
    await ws.create();
  });
  beforeEach(() => rmSync(proof, { force: true }));

  it("a helper or terminal relay file rewritten in the agent's directory is replaced before it runs", async () => {
    const first = await ws.run({ argv: ["paseo-workspace-helper", "describe"], env: {}, purpose: "workspace-helper" });
    expect(exitOf(first)).toEqual({ code: 0, signal: null });
    const pty = { kind: "pty", rows: 24, cols: 80 } as const;
    expect(exitOf(await ws.run({ argv: ["/bin/sh", "-c", "printf pty-ok"], env: {}, stdio: pty }))).toEqual({ code: 0, signal: null });
    // The relay that exec starts ahead of the next one (100 ms after it came up) is verified when
    // spawned, but its python reads the file a moment later: a rewrite landing in between would
    // race it, not test the check. So it is waited for and killed first; the next PTY exec finds it
    // gone and starts a relay anew, through the check.
    await killRelaysOf(join(agentDir, "terminal-relay.py"), await waitForRelay(join(agentDir, "terminal-relay.py")));
    const me = uidOf(rig().user);
    for (const [name, kind] of [
      ["helper.cjs", "node"],
      ["terminal-relay.py", "python"],
      ["terminal-script-child.cjs", "node"],
    ] as const) {
      const path = join(agentDir, name);
      expect(existsSync(path), path).toBe(true);
      writeFileSync(path, proofScript(kind, proof));
      chownSync(path, me, me);
    }
    const helper = await ws.run({ argv: ["paseo-workspace-helper", "describe"], env: {}, purpose: "workspace-helper" });
    expect(existsSync(proof)).toBe(false);
    expect(exitOf(helper)).toEqual({ code: 0, signal: null });
    expect(JSON.parse(helper.stdout.toString("utf8"))).toEqual(JSON.parse(HELPER_DESCRIBE));
    // Twice: the first may take a relay started ahead of it, before the rewrite.
    for (let i = 0; i < 2; i++) {
      const r = await ws.run({ argv: ["/bin/sh", "-c", "printf pty-ok"], env: {}, stdio: pty });
      expect(exitOf(r)).toEqual({ code: 0, signal: null });
      expect(r.stdout.toString("utf8")).toContain("pty-ok");
    }
    expect(existsSync(proof)).toBe(false);
    expect(readFileSync(join(agentDir, "helper.cjs"), "utf8")).not.toContain("pwned");
  });

  it("a root renamed away and replaced through a parent that became writable is refused, and nothing planted runs", async () => {
    const before = await ws.run({ argv: ["paseo-workspace-helper", "describe"], env: {}, purpose: "workspace-helper" });
    expect(exitOf(before)).toEqual({ code: 0, signal: null });

    const other = uidOf(rig().noisyUser!);
    chmodSync(shared, 0o777);
    const real = join(shared, "r.old");
    renameSync(root, real);
    mkdirSync(root, { mode: 0o755 });
    chownSync(root, other, other);
    for (const name of ["workspaces", "run", "cache", "tmp", ".paseo-ssh-root"]) {
      symlinkSync(join(real, name), join(root, name));
      lchownSync(join(root, name), other, other);
    }
    mkdirSync(agentDir, { recursive: true, mode: 0o755 });
    execFileSync("chown", ["-R", `${other}:${other}`, join(root, "agent")]);
    const planted = join(agentDir, "helper.cjs");
    writeFileSync(planted, proofScript("node", proof), { mode: 0o755 });
    chownSync(planted, other, other);

    try {
      const r = await ws.run({ argv: ["paseo-workspace-helper", "describe"], env: {}, purpose: "workspace-helper" });
      expect(existsSync(proof)).toBe(false);
      expect(r.stdout.toString("utf8")).toBe("");
      expect(`${r.fd4}${r.stderr}`).toContain(`remote root ${root} was replaced after the host daemon verified it`);
      expect(r.code).not.toBe(0);
    } finally {
      // Put the real root back so the workspace can be destroyed.
      rmSync(root, { recursive: true, force: true });
      renameSync(real, root);
      chmodSync(shared, 0o755);
    }
  });
});
