// sshd runs our command as `<login shell> -c '<command>'`. These tests run the exact bootstrap and
// install command lines through each login shell available here (sh, bash, zsh, fish, csh) with a
// hostile root, and check the dependency statuses the bootstrap script reports.
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { AgentChannel } from "../../src/transport/agent-channel.js";
import { BootStatusScanner, agentBundle, bootstrapCommand, installCommand } from "../../src/transport/bootstrap.js";
import { RuntimeError } from "../../src/shared/errors.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { connectSshHost } from "../../src/transport/ssh-host.js";
import { rig, rigOptions } from "../rig/rig.js";

const dirs = suite();
const SHELLS = ["/bin/sh", "/bin/bash", "/usr/bin/zsh", "/usr/bin/fish", "/usr/bin/csh"];
const bundle = agentBundle();
// Shell-special characters a root may contain (backslash, `!`, newline and NUL are refused).
const HOSTILE_ROOT = `~/pa'seo $HOME "x" ;\`id\` & *`;

function run(shell: string, command: string, home: string, stdin: Buffer | string = "", env: Record<string, string> = {}) {
  return spawnSync(shell, ["-c", command], { input: stdin, env: { HOME: home, PATH: "/usr/bin:/bin", ...env }, timeout: 20_000 });
}

function statusOf(stdout: Buffer): string | undefined {
  const s = new BootStatusScanner();
  s.push(stdout);
  return s.report ? `${s.report.status}${s.report.detail ? `:${s.report.detail}` : ""}` : undefined;
}

describe.each(SHELLS.filter((s) => existsSync(s)))("login shell %s", (shell) => {
  it("installs into and starts the agent from a hostile root", async () => {
    const home = dirs.tmp("paseo-shell-");
    const root = HOSTILE_ROOT;
    const dir = join(home, root.slice(2), "agent", bundle.hash);

    expect(statusOf(run(shell, bootstrapCommand(root, undefined, bundle.hash), home).stdout)).toBe(`need-install:${statusNode()}`);
    const installed = run(shell, installCommand(root, bundle.hash, bundle.size), home, readFileSync(bundle.path));
    expect(statusOf(installed.stdout)).toBe("installed");
    expect(readFileSync(join(dir, "agent.cjs")).equals(readFileSync(bundle.path))).toBe(true);

    const child = spawn(shell, ["-c", bootstrapCommand(root, undefined, bundle.hash)], { env: { HOME: home, PATH: "/usr/bin:/bin" } });
    const ch = new AgentChannel({ stdin: child.stdin, stdout: child.stdout, stderr: child.stderr, destroy: () => child.kill("SIGKILL") });
    try {
      await ch.ready;
      const facts = await ch.request({ op: "facts", root }, 20_000);
      expect(facts.root).toBe(join(home, root.slice(2)));
    } finally {
      ch.destroy();
    }
  });
});

describe.each(SHELLS.filter((s) => existsSync(s)))("login shell %s, unsafe root", (shell) => {
  it("refuses to run or install from a root others can write, naming it", () => {
    const home = dirs.tmp("paseo-unsafe-");
    const root = join(home, "r o'ot");
    mkdirSync(join(root, "agent", bundle.hash), { recursive: true, mode: 0o700 });
    chmodSync(root, 0o775);
    const owner = userInfo().username;
    expect(statusOf(run(shell, bootstrapCommand(root, undefined, bundle.hash), home).stdout)).toBe(
      `unsafe-root:drwxrwxr-x:${owner}:${root}`,
    );
    const install = run(shell, installCommand(root, bundle.hash, bundle.size), home, readFileSync(bundle.path));
    expect(statusOf(install.stdout)).toBe(`unsafe-root:drwxrwxr-x:${owner}:${root}`);
    expect(existsSync(join(root, "agent", bundle.hash, "agent.cjs"))).toBe(false);
  });

  it("refuses a root below a directory others can write (sticky too unless it is root's, or reached through a symlink), naming the nearest", () => {
    const home = dirs.tmp("paseo-parent-");
    const shared = join(home, "sh ared");
    const root = join(shared, "r o'ot");
    mkdirSync(join(root, "agent", bundle.hash), { recursive: true, mode: 0o700 });
    chmodSync(join(root, "agent"), 0o700);
    chmodSync(root, 0o700);
    const owner = userInfo().username;
    // A sticky one passes only when it is root's (like /tmp: nobody else can rename what we own in
    // it); this test's directories are its runner's.
    const asRoot = process.getuid?.() === 0;
    for (const [mode, shown] of [
      [0o777, "drwxrwxrwx"],
      [0o1777, "drwxrwxrwt"],
      [0o775, "drwxrwxr-x"],
    ] as const) {
      chmodSync(shared, mode);
      expect(statusOf(run(shell, bootstrapCommand(root, undefined, bundle.hash), home).stdout)).toBe(
        mode === 0o1777 && asRoot ? `need-install:${statusNode()}` : `unsafe-parent:${shown}:${owner}:${shared}`,
      );
    }
    // A root that does not exist yet is not even created there.
    chmodSync(shared, 0o777);
    const fresh = join(shared, "fresh", "root");
    const install = run(shell, installCommand(fresh, bundle.hash, bundle.size), home, readFileSync(bundle.path));
    expect(statusOf(install.stdout)).toBe(`unsafe-parent:drwxrwxrwx:${owner}:${shared}`);
    expect(existsSync(join(shared, "fresh"))).toBe(false);
    // Through a symlink of ours: its target's parents are judged too.
    symlinkSync(shared, join(home, "link"));
    expect(statusOf(run(shell, bootstrapCommand(join(home, "link", "r o'ot"), undefined, bundle.hash), home).stdout)).toBe(
      `unsafe-parent:drwxrwxrwx:${owner}:${shared}`,
    );
    // Parents owned by root or us and closed to others pass (up to the home directory).
    chmodSync(shared, 0o755);
    expect(statusOf(run(shell, bootstrapCommand(root, undefined, bundle.hash), home).stdout)).toBe(`need-install:${statusNode()}`);
  });
});

describe("install command", () => {
  it("concurrent installers all succeed, keep one intact file and leave no temp files", async () => {
    const home = dirs.tmp("paseo-race-");
    const data = readFileSync(bundle.path);
    const outputs = await Promise.all(
      Array.from(
        { length: 6 },
        () =>
          new Promise<Buffer>((resolve, reject) => {
            const child = spawn("/bin/sh", ["-c", installCommand("~/r", bundle.hash, bundle.size)], {
              env: { HOME: home, PATH: "/usr/bin:/bin" },
            });
            const out: Buffer[] = [];
            child.stdout.on("data", (d: Buffer) => out.push(d));
            child.on("error", reject);
            child.on("close", () => resolve(Buffer.concat(out)));
            // Write in two halves so the installers really overlap.
            child.stdin.write(data.subarray(0, data.length >> 1));
            setTimeout(() => child.stdin.end(data.subarray(data.length >> 1)), 50);
          }),
      ),
    );
    expect(outputs.map(statusOf)).toEqual(Array(6).fill("installed"));
    const dir = join(home, "r", "agent", bundle.hash);
    expect(readFileSync(join(dir, "agent.cjs")).equals(data)).toBe(true);
    expect(readdirSync(dir).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  it("a short upload is never linked into place", () => {
    const home = dirs.tmp("paseo-short-");
    const out = run("/bin/sh", installCommand("~/r", bundle.hash, bundle.size), home, readFileSync(bundle.path).subarray(0, 1000));
    expect(statusOf(out.stdout)).toBe("short-upload:1000");
    expect(out.status).not.toBe(0);
    expect(existsSync(join(home, "r", "agent", bundle.hash, "agent.cjs"))).toBe(false);
  });
});

/** The node the bootstrap finds with PATH=/usr/bin:/bin. */
function statusNode(): string {
  return spawnSync("/bin/sh", ["-c", "command -v node"], { env: { PATH: "/usr/bin:/bin" } })
    .stdout.toString()
    .trim();
}

describe("bootstrap dependency statuses", () => {
  const home = suite("all").tmp("paseo-deps-");
  const oldNode = join(home, "node16");
  writeFileSync(oldNode, "#!/bin/sh\necho 16.20.2\n");
  chmodSync(oldNode, 0o755);

  it("reports an old node with its version and path", () => {
    expect(statusOf(run("/bin/sh", bootstrapCommand("~/r", oldNode, bundle.hash), home).stdout)).toBe(`old-node:16.20.2:${oldNode}`);
  });

  it("reports a remoteNode that is not executable", () => {
    expect(statusOf(run("/bin/sh", bootstrapCommand("~/r", "/nonexistent/node", bundle.hash), home).stdout)).toBe(
      "bad-node:/nonexistent/node",
    );
  });

  it("reports missing git (node found) and missing node", () => {
    const empty = dirs.tmp("paseo-path-");
    const node = process.execPath;
    // /bin/sh itself needs no PATH; `command -v git` finds nothing in an empty directory.
    expect(
      statusOf(spawnSync("/bin/sh", ["-c", bootstrapCommand("~/r", node, bundle.hash)], { env: { HOME: home, PATH: empty } }).stdout),
    ).toBe(`no-git:${node}`);
  });
});

describe("dependency errors through sshd", () => {
  it("an old remote node is a remote-dependency error naming version and path", async () => {
    const r = rig();
    if (r.external) return;
    const stub = join(dirs.tmp(join(r.tmpDir, "node16-")), "node");
    writeFileSync(stub, "#!/bin/sh\necho 16.20.2\n");
    chmodSync(stub, 0o755);
    chmodSync(join(stub, ".."), 0o755);
    const h = await connectSshHost(parseRuntimeOptions(rigOptions({ remoteNode: stub })));
    try {
      const err = await h.call("ping", {}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RuntimeError);
      expect((err as RuntimeError).errorClass).toBe("remote-dependency");
      expect((err as RuntimeError).exitCode).toBe(6);
      expect((err as RuntimeError).message).toBe(
        `node at ${stub} on ${r.user}@${r.host}:${r.port} is version 16.20.2; Node.js >= 18 is required: install it, the "remoteNode" option points at ${stub}`,
      );
    } finally {
      h.close();
    }
  });
});
