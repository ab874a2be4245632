// forwardAgent over the real sshd (issue 28, item 2): the Paseo side's ssh-agent (a test agent of
// our own, on our own socket, holding a key only the test authorized) serves `git push` over SSH
// in a workspace created with the option, through the workspace's own git config, while the
// workload's environment stays exactly the exec's; without the option the same push is refused;
// after a reset of the link the push works again; another user cannot reach the socket.
import { execFileSync } from "node:child_process";
import { appendFileSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { writeKeyFile } from "../rig/keys.js";
import { rig, rigOptions, waitFor } from "../rig/rig.js";
import { ExecWorkspace, exitOf } from "../support/exec.js";
import { finish, throughProxy } from "../support/host-daemon.js";
import { needs, unless } from "../support/needs.js";
import { extraSshdSkipReason, startExtraSshd } from "../support/extra-sshd.js";
import { sleep } from "../support/exec.js";
import { runCli } from "../support/run-cli.js";
import { hostGit, onHost, requireView } from "../support/host-view.js";
import { suiteRoot } from "../support/workspace.js";
import type { DelayProxy } from "../../bench/delay-proxy.mjs";

const needed = unless(
  needs.localHost("runs an ssh-agent of its own and pushes to a bare repository over the rig's sshd"),
  needs.openssh("agent forwarding is sshd's"),
  needs.root("authorizes a key for the rig user and writes its known_hosts"),
);

const ENV = { PATH: "/usr/local/bin:/usr/bin:/bin", FORWARD_TEST: "exact" };

describe("forwardAgent: git in the workspace pushes with the Paseo side's ssh-agent", { timeout: 180_000, ...needed }, () => {
  const cleanups = suite("all");
  let agentDir: string;
  let bare: string;
  let url: string;
  let proxy: DelayProxy;
  let withAgent: ExecWorkspace;
  let without: ExecWorkspace;
  const saved = process.env.SSH_AUTH_SOCK;

  beforeAll(async () => {
    const r = rig();
    // Our own ssh-agent on our own socket, holding a key nobody else has.
    agentDir = cleanups.tmp("paseo-fwd-agent-");
    // SSH_AUTH_SOCK (set below) is part of a broker's key: restored only after every cleanup
    // registered later, or each finish() would stop a broker of its own while the workspace's
    // broker lives on, holding the daemon's notices and starting a daemon again once the root is gone.
    cleanups.push(() => {
      if (saved === undefined) delete process.env.SSH_AUTH_SOCK;
      else process.env.SSH_AUTH_SOCK = saved;
    });
    const sock = join(agentDir, "agent.sock");
    const out = execFileSync("ssh-agent", ["-a", sock, "-s"], { encoding: "utf8" });
    const pid = Number(/SSH_AGENT_PID=(\d+)/.exec(out)?.[1]);
    cleanups.push(() => void process.kill(pid, "SIGTERM"));
    const key = join(agentDir, "id_ed25519");
    const publicKey = writeKeyFile(key);
    execFileSync("ssh-add", ["-q", key], { env: { ...process.env, SSH_AUTH_SOCK: sock } });
    rmSync(key);
    // The forge: a bare repository on the host, reached over the rig's sshd as the rig user, who
    // has no key of their own there: only the agent's key gets in.
    appendFileSync(join(r.tmpDir, "authorized_keys"), `${publicKey}\n`);
    const home = r.remoteHome!;
    const sshDir = join(home, ".ssh");
    execFileSync("mkdir", ["-p", onHost(sshDir)]);
    const knownHosts = join(sshDir, "known_hosts");
    const knownBefore = (() => {
      try {
        return readFileSync(onHost(knownHosts), "utf8");
      } catch {
        return null;
      }
    })();
    appendFileSync(
      onHost(knownHosts),
      r.hostPublicKeys.map((k) => `[127.0.0.1]:${r.port} ${k.split(" ").slice(0, 2).join(" ")}\n`).join(""),
    );
    const { uid, gid } = requireView().idsOf(r.user);
    execFileSync("chown", ["-R", `${uid}:${gid}`, onHost(sshDir)]);
    cleanups.push(() => (knownBefore === null ? rmSync(onHost(knownHosts)) : writeFileSync(onHost(knownHosts), knownBefore)));
    bare = join(suiteRoot("fwd-forge"), "forge.git");
    execFileSync("git", ["init", "-q", "--bare", onHost(bare)]);
    execFileSync("chown", ["-R", `${uid}:${gid}`, onHost(dirname(bare))]);
    cleanups.push(() => rmSync(onHost(dirname(bare)), { recursive: true, force: true }));
    url = `ssh://${r.user}@127.0.0.1:${r.port}${bare}`;

    // The runtime (and the broker it starts) find the agent where ssh would: SSH_AUTH_SOCK.
    process.env.SSH_AUTH_SOCK = sock;
    const through = await throughProxy(cleanups, { forwardAgent: true, sshConfig: false });
    proxy = through.proxy;
    withAgent = new ExecWorkspace("fwd-on", { ...through.options, sshConfig: false });
    cleanups.push(() => finish(withAgent));
    await withAgent.create();
    without = new ExecWorkspace("fwd-off", { sshConfig: false });
    cleanups.push(() => finish(without));
    await without.create();
  });
  // The proxy first: it holds the sshd side of the broker's connection (and so the forwarding
  // session) open after the broker left. afterAll hooks run newest first: this one before the
  // fixture's cleanups.
  afterAll(() => proxy?.close());

  const push = (ws: ExecWorkspace, branch: string) =>
    ws.run({ argv: ["git", "push", "-q", url, `HEAD:refs/heads/${branch}`], env: ENV, cwd: ws.root });
  const forgeHas = (branch: string) => {
    try {
      execFileSync("git", ["-c", "safe.directory=*", "-C", onHost(bare), "rev-parse", "--verify", "--quiet", `refs/heads/${branch}`]);
      return true;
    } catch {
      return false;
    }
  };
  const agentDirOf = (ws: ExecWorkspace) => join(workspaceLayout(ws.configuredRoot, ws.workspaceId).dir, "ssh-agent");
  /** The workspace's link leads to a live agent socket (other than `not`, the one before a reset). */
  const linked = (ws: ExecWorkspace, not = "") =>
    waitFor(() => {
      try {
        const link = join(agentDirOf(ws), "agent.sock");
        return readlinkSync(onHost(link)) !== not && statSync(onHost(link)).isSocket();
      } catch {
        return false;
      }
    }, 30_000);
  const envOf = async (ws: ExecWorkspace) => (await ws.run({ argv: ["/usr/bin/env"], env: ENV })).stdout.toString();

  it("a push succeeds with forwardAgent and is refused without it; the workload's env is exactly the exec's", async () => {
    await linked(withAgent);
    const ok = await push(withAgent, "with-agent");
    expect(ok.stderr).toBe("");
    expect(exitOf(ok)).toEqual({ code: 0, signal: null });
    expect(forgeHas("with-agent")).toBe(true);

    const refused = await push(without, "without-agent");
    expect(exitOf(refused).code).not.toBe(0);
    expect(refused.stderr).toMatch(/Permission denied \(publickey/);
    expect(forgeHas("without-agent")).toBe(false);

    expect(await envOf(withAgent)).toBe("PATH=/usr/local/bin:/usr/bin:/bin\nFORWARD_TEST=exact\n");
    expect(await envOf(without)).toBe("PATH=/usr/local/bin:/usr/bin:/bin\nFORWARD_TEST=exact\n");
  });

  it("the agent is reached through a link in a 0700 directory of the workspace, named by its git config only", () => {
    const dir = agentDirOf(withAgent);
    expect(statSync(onHost(dir)).mode & 0o777).toBe(0o700);
    const link = join(dir, "agent.sock");
    expect(statSync(onHost(link)).isSocket()).toBe(true);
    expect(readlinkSync(onHost(link))).toMatch(/^\/tmp\/ssh-/);
    expect(hostGit(withAgent.root, ["config", "core.sshCommand"]).trim()).toBe(`cd '${dir}' && exec ssh -o IdentityAgent=agent.sock`);
    // Another user of the host cannot even reach the directory.
    const probe = `require("net").connect(process.argv[1]).on("connect",()=>{console.log("connected");process.exit(0)}).on("error",e=>{console.log(e.code);process.exit(0)})`;
    const asNobody = execFileSync(
      "setpriv",
      ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, "-e", probe, onHost(link)],
      {
        encoding: "utf8",
      },
    );
    expect(asNobody.trim()).toBe("EACCES");
  });

  it("after a reset of the link, a push works again", async () => {
    proxy.cutAll({ reset: true });
    // The broker reconnects and opens a new forwarding session; the workspace's link follows it.
    const before = readlinkSync(onHost(join(agentDirOf(withAgent), "agent.sock")));
    const r0 = await withAgent.run({ argv: ["/bin/true"], env: ENV });
    expect(exitOf(r0).code).toBe(0);
    await linked(withAgent, before);
    const ok = await push(withAgent, "after-reset");
    expect(ok.stderr).toBe("");
    expect(exitOf(ok)).toEqual({ code: 0, signal: null });
    expect(forgeHas("after-reset")).toBe(true);
    expect(await envOf(withAgent)).toBe("PATH=/usr/local/bin:/usr/bin:/bin\nFORWARD_TEST=exact\n");
  });

  it("a host whose sshd refuses agent forwarding gets nothing: the push fails as without the option", async (ctx) => {
    const why = extraSshdSkipReason();
    if (why) return ctx.skip(why);
    const sshd = await startExtraSshd(["AllowAgentForwarding no"]);
    cleanups.push(() => sshd.stop());
    const ws = new ExecWorkspace("fwd-refused", { ...sshd.options(), forwardAgent: true, sshConfig: false });
    cleanups.push(() => finish(ws));
    await ws.create();
    // Time for a forwarding session to have been refused (an accepted one registers within this).
    await sleep(2000);
    const link = join(agentDirOf(ws), "agent.sock");
    expect(() => statSync(onHost(link))).toThrow();
    const refused = await push(ws, "refused-by-sshd");
    expect(exitOf(refused).code).not.toBe(0);
    expect(refused.stderr).toMatch(/Permission denied \(publickey/);
    expect(forgeHas("refused-by-sshd")).toBe(false);

    // doctor says so; and where sshd forwards, that it does.
    const doctor = async (options: Record<string, unknown>) =>
      (await runCli(["doctor", "--options", JSON.stringify(options)], { timeoutMs: 60_000 })).stdout.toString();
    expect(await doctor({ ...sshd.options({ root: ws.configuredRoot }), forwardAgent: true, sshConfig: false })).toMatch(
      /^warn ssh-agent forward .*refused by the host's sshd/m,
    );
    expect(await doctor(rigOptions({ root: withAgent.configuredRoot, forwardAgent: true, sshConfig: false }))).toMatch(
      /^ok +ssh-agent forward .*forwarded: git in workspaces created with forwardAgent/m,
    );
  });
});
