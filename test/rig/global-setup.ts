// vitest globalSetup: starts the SSH server the suites run against on 127.0.0.1, with fresh host
// keys, client keys and known_hosts in a temp dir (keys.ts): OpenSSH's sshd when it is installed,
// otherwise the embedded ssh2 server `npm run demo` uses (server-choice.ts says which and why). As
// root it logs in as dedicated non-root users (`paseotest`, and for sshd `paseonoisy` whose rc
// files print noise); otherwise the server runs as the current user, who logs in as themselves.
// PASEO_TEST_SSH_HOST (+ _PORT, _USER, _IDENTITY, _KNOWN_HOSTS) targets an external host instead.
// The description reaches test workers as JSON in PASEO_TEST_RIG (see rig.ts).
//
// The run leaves nothing behind: it gets a private TMPDIR, so every broker it starts lives in a
// directory of its own, and every process it starts is recognisable (run-processes.ts). Teardown
// asks those brokers to shut down, stops the server, and fails the run (exit code 1) if any
// process of the run is still there after a short grace period (it is killed and named).
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { startEmbeddedServer } from "../../src/demo/embedded-server.js";
import { stopPrivateBrokers } from "../../src/demo/brokers.js";
import { ENCRYPTED_KEY_PASSPHRASE, writeKnownHosts, writeRigKeys } from "./keys.js";
import { openSshOnly } from "./needs-openssh.js";
import { NEEDS } from "../support/needs.js";
import type { RigInfo } from "./rig.js";
import { RUN_MARK_VARIABLE, WATCHDOG, pin, reapRun, runProcesses, signal, type RunIdentity } from "./run-processes.js";
import { chooseServer } from "./server-choice.js";
import {
  NOISY_USER,
  TEST_USER,
  applyUserSteps,
  createUserSteps,
  noisyRcSteps,
  prepareUserSteps,
  type UserSetupStep,
} from "./sshd-config.js";
import { startSshd } from "./sshd.js";

/** How long the run's processes get to end by themselves once brokers and server are stopped. */
const GRACE_MS = 5_000;

const sh = (cmd: string, args: string[]) => execFileSync(cmd, args, { stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 }).toString();

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** The passwd entry's uid, gid and home. */
function account(user: string): { uid: number; gid: number; home: string } {
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${user}:`));
  if (!line) throw new Error(`no passwd entry for ${user}`);
  const fields = line.split(":");
  return { uid: Number(fields[2]), gid: Number(fields[3]), home: fields[5]! };
}

function homeOf(user: string): string {
  return account(user).home;
}

const applySteps = (steps: UserSetupStep[]) => applyUserSteps(steps, (cmd, args) => void sh(cmd, args));

/** Creates (if missing) a login-capable, non-root user with a usable home. */
function ensureUser(user: string): string {
  try {
    sh("id", ["-u", user]);
  } catch {
    applySteps(createUserSteps(user));
  }
  const home = homeOf(user);
  applySteps(prepareUserSteps(user, home));
  return home;
}

type RigFacts = Omit<RigInfo, "tmpDir" | "runId">;

/** A command's stdout inside the compose container (docker exec, as root). */
function inContainer(container: string, argv: string[]): string {
  return sh("docker", ["exec", container, ...argv]).trim();
}

/** The known_hosts keys (`type base64`) recorded for host:port. */
function knownKeysOf(file: string, host: string, port: number): string[] {
  const name = port === 22 ? host : `[${host}]:${port}`;
  return readFileSync(file, "utf8")
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter(([names]) => names?.split(",").includes(name))
    .map(([, type, key]) => `${type} ${key}`);
}

function externalRig(tmpDir: string): RigFacts {
  const env = process.env;
  const knownHostsFile = env.PASEO_TEST_SSH_KNOWN_HOSTS ?? join(userInfo().homedir, ".ssh", "known_hosts");
  const hashed = join(tmpDir, "known_hosts.hashed");
  copyFileSync(knownHostsFile, hashed);
  sh("ssh-keygen", ["-H", "-f", hashed]);
  const host = env.PASEO_TEST_SSH_HOST!;
  const port = Number(env.PASEO_TEST_SSH_PORT ?? 22);
  const user = env.PASEO_TEST_SSH_USER ?? userInfo().username;
  const container = env.PASEO_TEST_SSH_CONTAINER || null;
  // The compose image (test/docker/) is the rig's server: the same users, the same rc noise.
  const passwd = (name: string) => (container ? inContainer(container, ["getent", "passwd", name]).split(":") : null);
  const hasNoisy = container !== null && sh("docker", ["exec", container, "sh", "-c", `getent passwd ${NOISY_USER} || true`]).trim() !== "";
  return {
    server: "external",
    serverBecause: container ? `PASEO_TEST_SSH_HOST=${host}, container ${container.slice(0, 12)}` : `PASEO_TEST_SSH_HOST=${host}`,
    external: true,
    container,
    // The login user's node: the container's through a login shell's PATH; elsewhere `node` by name.
    remoteNode: container ? inContainer(container, ["su", "-l", user, "-c", "command -v node"]) : "node",
    host,
    port,
    user,
    identityFile: env.PASEO_TEST_SSH_IDENTITY ?? join(userInfo().homedir, ".ssh", "id_ed25519"),
    encryptedIdentityFile: null,
    encryptedPassphrase: ENCRYPTED_KEY_PASSPHRASE,
    knownHostsFile,
    hashedKnownHostsFile: hashed,
    hostPublicKeys: knownKeysOf(knownHostsFile, host, port),
    sshdLog: null,
    remoteHome: passwd(user)?.[5] ?? null,
    noisyUser: hasNoisy ? NOISY_USER : null,
    noisyUserSkipReason: hasNoisy ? null : "external host: no rc-noise user",
    ptySkipReason: null,
  };
}

interface LocalServer {
  facts: RigFacts;
  /** Login users' homes: the run's remote roots are removed from them at the end. */
  homes: string[];
  /** sshd's pid (the embedded server lives in this process). */
  pid: number | null;
  stop(): Promise<void>;
}

async function localRig(tmpDir: string): Promise<LocalServer> {
  const choice = chooseServer(process.env.PASEO_TEST_SERVER);
  const isRoot = process.getuid?.() === 0;
  const openssh = choice.server === "openssh";
  const keys = writeRigKeys(tmpDir);

  let user = userInfo().username;
  let remoteHome = userInfo().homedir;
  let noisyUser: string | null = null;
  let noisyUserSkipReason: string | null = `${NEEDS}root: only root creates the rig's second login user`;
  if (isRoot) {
    remoteHome = ensureUser(TEST_USER);
    user = TEST_USER;
    if (openssh) {
      applySteps(noisyRcSteps(NOISY_USER, ensureUser(NOISY_USER)));
      noisyUser = NOISY_USER;
      noisyUserSkipReason = null;
      mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
    }
  }
  if (!openssh) noisyUserSkipReason = openSshOnly("a second login user whose login shell runs noisy rc files");

  let port: number;
  let server: { stop(): Promise<void>; pid: number | null; log: string | null; ptySkipReason: string | null };
  if (openssh) {
    port = await freePort();
    const sshd = await startSshd(tmpDir, port, noisyUser ? [user, noisyUser] : [user]);
    const ptySkipReason = isRoot ? null : `${NEEDS}root: sshd not started as root cannot allocate pseudo-terminals`;
    server = { stop: () => sshd.stop(), pid: sshd.pid, log: sshd.log, ptySkipReason };
  } else {
    // Same credentials as sshd gets; it serves its commands as the login user, through /bin/sh.
    const embedded = await startEmbeddedServer({
      hostKeys: keys.hostKeyFiles.map((f) => readFileSync(f, "utf8")),
      authorizedKeys: keys.authorizedKeys,
      login: { user, ...account(user) },
    });
    port = embedded.port;
    const ptySkipReason = embedded.ptySupported ? null : `${NEEDS}util-linux script: the embedded server's PTYs run under it`;
    server = { stop: () => embedded.close(), pid: null, log: null, ptySkipReason };
  }
  const { knownHostsFile, hashedKnownHostsFile } = writeKnownHosts(tmpDir, port, keys.hostPublicKeys);
  return {
    facts: {
      server: choice.server,
      serverBecause: choice.because,
      external: false,
      container: null,
      remoteNode: process.execPath,
      host: "127.0.0.1",
      port,
      user,
      identityFile: keys.identityFile,
      encryptedIdentityFile: keys.encryptedIdentityFile,
      encryptedPassphrase: ENCRYPTED_KEY_PASSPHRASE,
      knownHostsFile,
      hashedKnownHostsFile,
      hostPublicKeys: keys.hostPublicKeys,
      sshdLog: server.log,
      remoteHome,
      noisyUser,
      noisyUserSkipReason,
      ptySkipReason: server.ptySkipReason,
    },
    homes: noisyUser ? [remoteHome, homeOf(noisyUser)] : [remoteHome],
    pid: server.pid,
    stop: () => server.stop(),
  };
}

export default async function setup(): Promise<() => Promise<void>> {
  const runId = randomBytes(4).toString("hex");
  const tmpDir = mkdtempSync(join(tmpdir(), "paseo-rig-"));
  // sshd reads AuthorizedKeysFile as the target user, so the directory must be traversable.
  chmodSync(tmpDir, 0o755);
  // The run's TMPDIR, like /tmp but the run's own: brokers go to <TMPDIR>/paseo-ssh-<uid> when
  // XDG_RUNTIME_DIR is unset (src/broker/common/broker-paths.ts), and test scratch files end with the run.
  const runTmp = join(tmpDir, "tmp");
  mkdirSync(runTmp);
  chmodSync(runTmp, 0o1777);
  const savedEnv = { TMPDIR: process.env.TMPDIR, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR };
  process.env.TMPDIR = runTmp;
  delete process.env.XDG_RUNTIME_DIR;
  const unmarkedEnv = { ...process.env };
  // Everything started from here on (the server, test workers, runtime processes) inherits it.
  process.env[RUN_MARK_VARIABLE] = runId;

  let local: LocalServer | null = null;
  let facts: RigFacts;
  try {
    if (process.env.PASEO_TEST_SSH_HOST) {
      facts = externalRig(tmpDir);
    } else {
      local = await localRig(tmpDir);
      facts = local.facts;
    }
  } catch (err) {
    rmSync(tmpDir, { recursive: true, force: true });
    throw err;
  }
  const info: RigInfo = { ...facts, tmpDir, runId };
  process.env.PASEO_TEST_RIG = JSON.stringify(info);
  const serverPid = local?.pid ?? null;
  const watchdogArgs = [String(process.pid), runId, ...(serverPid ? [String(serverPid)] : [])];
  const watchdog = spawn(process.execPath, ["-e", WATCHDOG, ...watchdogArgs], { stdio: "ignore", detached: true, env: unmarkedEnv });
  watchdog.unref();

  const identity: RunIdentity = {
    runId,
    // ~/.paseo-ssh-test-<id>… (rig.ts) and ~/paseo-ws-suite-<id>-… (test/support/workspace.ts).
    rootMarks: [`/.paseo-ssh-test-${runId}`, `/paseo-ws-suite-${runId}-`],
    // vitest's own workers carry the mark too; they are not the run's to stop.
    exclude: (p) => p.ppid === process.pid && /[\\/]vitest[\\/]/.test(p.command),
    pids: serverPid ? [serverPid] : [],
    pinned: new Set(),
  };

  return async () => {
    const problems: string[] = [];
    try {
      await stopPrivateBrokers(runTmp);
    } catch (err) {
      problems.push((err as Error).message);
    }
    // A broker whose socket a test replaced exits only once idle; it need not wait that long. Nor
    // need a host daemon of the run's roots (one no broker retired: in-process tests), which
    // reaps what it still supervises on SIGTERM.
    signal(
      runProcesses(identity)
        .filter((p) => p.command === "paseo-ssh-broker" || /agent\.cjs daemon( |$)/.test(p.command))
        .map((p) => p.pid),
      "SIGTERM",
    );
    // sshd's sessions outlive it until their connections close; they stay the run's.
    pin(identity);
    await local?.stop();
    // Server sessions and remote agents end with their connections; anything else is a leak.
    problems.push(...(await reapRun(identity, GRACE_MS)));
    watchdog.kill();
    delete process.env[RUN_MARK_VARIABLE];
    for (const [name, value] of Object.entries(savedEnv)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    if (!process.env.PASEO_TEST_KEEP_RIG) {
      rmSync(tmpDir, { recursive: true, force: true });
      // This run's remote roots (the run id keeps concurrent runs on one machine apart).
      const roots = local
        ? [
            ...local.homes.map((home) => ({ dir: home, prefix: `.paseo-ssh-test-${runId}` })),
            ...local.homes.map((home) => ({ dir: home, prefix: `paseo-ws-suite-${runId}-` })),
          ]
        : [];
      for (const { dir, prefix } of roots) {
        for (const name of readdirSync(dir)) if (name.startsWith(prefix)) rmSync(join(dir, name), { recursive: true, force: true });
      }
    }
    if (problems.length > 0) {
      process.stderr.write(`\nrig teardown: ${problems.join("\n  ")}\n`);
      process.exitCode = 1;
    }
  };
}
