// Reaching hosts through jump hosts and proxy commands, against real sshd instances in network
// namespaces (test/support/jump-rig.ts): the middle server accepts connections only through the
// bastion, the target only through the middle. Hosts are named by ssh_config aliases; each hop has
// its own user, key and host-key check.
import { randomBytes } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, rmSync, rmdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { spawnOp, runWorkload, type RuntimeCommand } from "../../src/demo/runtime-driver.js";
import { RuntimeError } from "../../src/shared/errors.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { connectSsh } from "../../src/transport/ssh-connection.js";
import { connectSshHost } from "../../src/transport/ssh-host.js";
import { newExecId } from "../support/exec.js";
import { seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { needsOpenSsh, openSshOnly } from "../rig/needs-openssh.js";
import { rig, waitFor } from "../rig/rig.js";
import { jumpRigSkipReason, startJumpRig, type JumpRig, type Sshd } from "../support/jump-rig.js";
import { CLI_PATH, runCli } from "../support/run-cli.js";
import { suiteRoot } from "../support/workspace.js";

const skip =
  jumpRigSkipReason() ?? (rig().noisyUser === null ? openSshOnly("the rig's second login user logs in through the jump hosts") : null);
const BASTION_USER = rig().noisyUser ?? "";
const INNER_USER = rig().user;

let jr: JumpRig;
let config: string;
let repo: FixtureRepo;
/** ~/.ssh of the user running the tests: `%d/.ssh/id_%h` must resolve there. */
const homeSsh = join(userInfo().homedir, ".ssh");
let homeSshCreated = false;
let homeKey: string;
const root = suiteRoot("jump");

function configText(j: JumpRig, wrongKnownHosts: string, emptyKnownHosts: string): string {
  const b = j.bastion.address;
  return `
Include ${j.dir}/conf.d/*.conf

Host bastion
  HostName ${b}
  User ${BASTION_USER}
  IdentityFile ${j.keys.bastion}
  IdentitiesOnly yes

Host nofwd
  HostName ${b}
  Port ${j.noForwardBastion.port}
  User ${BASTION_USER}
  IdentityFile ${j.keys.bastion}

Host spare
  HostName ${b}
  Port ${j.spareBastion.port}
  User ${BASTION_USER}
  IdentityFile ${j.keys.bastion}
  ServerAliveInterval 1
  ServerAliveCountMax 2

Host badbastion
  HostName ${b}
  User ${BASTION_USER}
  IdentityFile ${j.keys.bastion}
  UserKnownHostsFile ${wrongKnownHosts}

Host middle behind-* via-*
  HostName ${j.middle.address}
  User ${INNER_USER}
  IdentityFile ${j.keys.middle}

Host middle
  ProxyJump bastion
Host behind-bad
  ProxyJump badbastion
Host behind-nofwd
  ProxyJump nofwd
Host behind-spare
  ProxyJump spare
Host via-nc
  ProxyCommand ip netns exec ${j.bastion.ns} nc %h %p
Host via-failing
  ProxyCommand sh -c 'echo "no route to the bastion from here" >&2; exit 3'
Host selfjump
  HostName ${b}
  User ${BASTION_USER}
  IdentityFile ${j.keys.bastion}
  ProxyJump bastion

Host target target-list
  HostName ${j.target.address}
  User ${INNER_USER}
  IdentityFile ${j.keys.target}
Host target
  ProxyJump middle
Host target-list
  ProxyJump bastion,middle

Host loop-a
  HostName ${b}
  Port 2300
  ProxyJump loop-b
Host loop-b
  HostName ${j.middle.address}
  ProxyJump loop-a

Host acceptnew
  HostName ${b}
  User ${BASTION_USER}
  IdentityFile ${j.keys.bastion}
  StrictHostKeyChecking accept-new
  UserKnownHostsFile ${emptyKnownHosts}

Host *
  UserKnownHostsFile ${j.knownHosts}
`;
}

beforeAll(async () => {
  if (skip) return;
  jr = await startJumpRig({ bastion: BASTION_USER, inner: INNER_USER });
  const wrong = join(jr.dir, "known_hosts.wrong");
  // The bastion's address with another server's key: a man in the middle, as far as we can tell.
  writeFileSync(wrong, `${jr.bastion.address} ${jr.target.hostKey}\n`);
  mkdirSync(join(jr.dir, "conf.d"));
  // An alias from an included file whose key path uses %d and %h.
  writeFileSync(
    join(jr.dir, "conf.d", "inc.conf"),
    `Host inc-middle\n  HostName ${jr.middle.address}\n  User ${INNER_USER}\n  ProxyJump bastion\n  IdentityFile %d/.ssh/id_%h\n`,
  );
  if (!existsSync(homeSsh)) {
    mkdirSync(homeSsh, { mode: 0o700 });
    homeSshCreated = true;
  }
  homeKey = join(homeSsh, `id_${jr.middle.address}`);
  copyFileSync(jr.keys.middle, homeKey);
  config = join(jr.dir, "ssh_config");
  writeFileSync(config, configText(jr, wrong, join(jr.dir, "known_hosts.empty")));
  repo = seedRepo();
});

afterAll(async () => {
  if (skip) return;
  rmSync(homeKey, { force: true });
  if (homeSshCreated && readdirSync(homeSsh).length === 0) rmdirSync(homeSsh);
  await jr?.stop();
});

const opts = (host: string, extra: Record<string, unknown> = {}) =>
  parseRuntimeOptions({ host, sshConfig: config, root, broker: false, connectTimeoutMs: 8000, ...extra });

async function failure(host: string, extra: Record<string, unknown> = {}): Promise<RuntimeError> {
  const err = await connectSsh(opts(host, extra)).then(
    (c) => {
      c.close();
      throw new Error(`connection to ${host} unexpectedly succeeded`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RuntimeError);
  return err as RuntimeError;
}

function reachableDirectly(s: Sshd): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: s.address, port: s.port });
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(3000, () => done(false));
    sock.once("connect", () => done(true));
    sock.once("error", () => done(false));
  });
}

async function facts(host: string): Promise<string> {
  const h = await connectSshHost(opts(host));
  try {
    return (await h.call("facts", {})).os;
  } finally {
    h.close();
  }
}

describe("ProxyJump and ProxyCommand against real sshd instances", () => {
  beforeEach((ctx) => {
    needsOpenSsh(ctx, "sshd instances in network namespaces, logging in as the rig's two users");
    if (skip) ctx.skip(skip);
  });

  it("the middle and the target refuse direct connections; the bastion is reachable", async () => {
    expect(await reachableDirectly(jr.bastion)).toBe(true);
    expect(await reachableDirectly(jr.middle)).toBe(false);
    expect(await reachableDirectly(jr.target)).toBe(false);
  });

  it("create, exec and destroy by an alias from an Included file (IdentityFile %d/.ssh/id_%h) through ProxyJump bastion", async () => {
    const cmd: RuntimeCommand = { argv: [process.execPath, CLI_PATH], env: process.env, id: "ssh" };
    const workspaceId = `jump-${randomBytes(4).toString("hex")}`;
    const runtimeInstanceId = randomBytes(32).toString("hex");
    // Through the broker, as Paseo runs it; a short idle time so it does not outlive the rig.
    const options = { host: "inc-middle", sshConfig: config, root, brokerIdleMs: 2000 };
    const request = { protocolVersion: 1 as const, runtimeInstanceId, options };
    const bastionLog = jr.bastion.logText().length;
    const middleLog = jr.middle.logText().length;
    const created = await spawnOp(
      cmd,
      "create",
      { "workspace-id": workspaceId },
      {
        ...request,
        input: {
          workspaceId,
          project: { projectId: "jump", source: { kind: "directory", path: repo.path } },
          placement: { kind: "existing" },
        },
      },
    );
    expect((created.response as { type: string }).type).toBe("state");
    const run = await runWorkload(cmd, workspaceId, {
      type: "spawn",
      protocolVersion: 1,
      runtimeInstanceId,
      options,
      purpose: { kind: "terminal" },
      stdio: { kind: "pipes" },
      argv: ["/bin/sh", "-c", "cat committed.txt; id -un"],
      env: { PATH: "/usr/bin:/bin" },
      execId: newExecId(),
    });
    expect(run.code).toBe(0);
    expect(run.stdout.toString()).toBe(`committed\n${INNER_USER}\n`);
    await spawnOp(cmd, "destroy", { "workspace-id": workspaceId }, request);
    // Each hop logged in as its own user with its own key; the middle saw only the bastion.
    expect(jr.bastion.logText().slice(bastionLog)).toMatch(
      new RegExp(`Accepted publickey for ${BASTION_USER} from ${jr.bastion.address.replace(/\.\d+$/, ".1")}`),
    );
    const middleSaw = jr.middle.logText().slice(middleLog);
    expect(middleSaw).toContain(`Accepted publickey for ${INNER_USER} from ${jr.middle.address.replace(/\.\d+$/, ".5")}`);
  });

  it("two hops: the target's ProxyJump middle, whose own ProxyJump is the bastion; and ProxyJump bastion,middle", async () => {
    const before = jr.target.logText().length;
    expect(await facts("target")).toMatch(/^linux/);
    expect(await facts("target-list")).toMatch(/^linux/);
    const log = jr.target.logText().slice(before);
    expect(
      log.match(new RegExp(`Accepted publickey for ${INNER_USER} from ${jr.target.address.replace(/\.\d+$/, ".9")}`, "g")),
    ).toHaveLength(2);
  });

  it("doctor prints every hop of the chain with its key, known_hosts entry and config lines", async () => {
    const r = await runCli(["doctor", "--options", JSON.stringify({ host: "target", sshConfig: config, root })], { timeoutMs: 60_000 });
    const out = r.stdout.toString();
    expect(r.code, r.stderr).toBe(0);
    expect(out).toContain(`hop 1/3 bastion (${jr.bastion.address})`);
    expect(out).toContain(`hop 2/3 middle (${jr.middle.address})`);
    expect(out).toContain(`hop 3/3 target (${jr.target.address})`);
    expect(out).toContain(`key ${jr.keys.bastion}`);
    expect(out).toContain(`${config}:`);
    expect(out).toMatch(new RegExp(`known_hosts ${jr.knownHosts.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} line \\d`));
    expect(out).toMatch(/ok +authenticated .* paseotest with publickey via /);
  });

  it("config --host <alias> keeps the alias in options and its doctor run goes through the bastion", async () => {
    const r = await runCli(["config", "--host", "middle", "--ssh-config", config, "--root", root, "--doctor", "true"], {
      timeoutMs: 60_000,
    });
    expect(r.code, r.stderr).toBe(0);
    const entry = (JSON.parse(r.stdout.toString()) as { workspaceRuntimes: { ssh: { options: Record<string, unknown> } } })
      .workspaceRuntimes.ssh;
    expect(entry.options).toEqual({ host: "middle", root, sshConfig: config });
    expect(r.stderr).toContain(`hop 1/2 bastion (${jr.bastion.address})`);
  });

  it("a wrong bastion host key fails naming the bastion, before any authentication to it", async () => {
    const before = jr.bastion.logText().length;
    const err = await failure("behind-bad");
    expect(err.errorClass).toBe("host-key");
    expect(err.message).toMatch(/^jump host badbastion \(/);
    expect(err.message).toContain("CHANGED");
    const log = jr.bastion.logText().slice(before);
    expect(log).toContain("Connection from");
    expect(log.split("\n").filter((l) => /Accepted|Failed|Postponed|userauth|Invalid user|publickey/i.test(l))).toEqual([]);
  });

  it("AllowTcpForwarding no on the bastion is one line naming the bastion and the setting", async () => {
    const err = await failure("behind-nofwd");
    expect(err.errorClass).toBe("network");
    expect(err.message).toMatch(/^Jump host nofwd \(/);
    expect(err.message).toContain("AllowTcpForwarding no");
    expect(err.message).not.toContain("\n");
  });

  it("ProxyCommand carries the connection (here: nc run inside the bastion's network)", async () => {
    expect(await facts("via-nc")).toMatch(/^linux/);
  });

  it("a failing ProxyCommand's stderr ends up in the error line", async () => {
    const err = await failure("via-failing");
    expect(err.errorClass).toBe("network");
    expect(err.message).toContain("no route to the bastion from here");
    expect(err.message).toContain("exit 3");
  });

  it("a jump host that is the target itself, and a ProxyJump cycle, are refused as loops", async () => {
    const self = await failure("selfjump");
    expect(self.errorClass).toBe("input");
    expect(self.message).toMatch(/ProxyJump loop/);
    const cycle = await failure("loop-a");
    expect(cycle.message).toMatch(/ProxyJump loop/);
  });

  it("accept-new records an unknown key only with the acceptNewHostKeys opt-in", async () => {
    const file = join(jr.dir, "known_hosts.empty");
    const refused = await failure("acceptnew");
    expect(refused.errorClass).toBe("host-key");
    expect(refused.message).toContain("acceptNewHostKeys");
    expect(existsSync(file)).toBe(false);
    const c = await connectSsh(opts("acceptnew", { acceptNewHostKeys: true }));
    c.close();
    expect(readFileSync(file, "utf8")).toBe(`${jr.bastion.address} ${jr.bastion.hostKey}\n`);
  });

  it("a frozen bastion ends the connection through it within the bastion's keepalive window", async () => {
    const conn = await connectSsh(opts("behind-spare"));
    expect(conn.closed).toBe(false);
    for (const pid of jr.spareBastion.pids()) process.kill(pid, "SIGSTOP");
    // ServerAliveInterval 1 x ServerAliveCountMax 2 on the bastion; the target's own keepalive
    // (15 s x 3) is far outside this bound, so only the bastion's can have ended it.
    await waitFor(() => conn.closed, 8000);
    for (const pid of jr.spareBastion.pids()) process.kill(pid, "SIGKILL");
  });
});
