// vitest globalSetup: starts a real OpenSSH sshd on 127.0.0.1 (fresh host keys, client keys,
// config and known_hosts in a temp dir) so transport and end-to-end tests run against the real
// thing. As root it logs in as dedicated non-root users (`paseotest`, and `paseonoisy` whose rc
// files print noise); otherwise sshd runs as the current user, who logs in as themselves.
// PASEO_TEST_SSH_HOST (+ _PORT, _USER, _IDENTITY, _KNOWN_HOSTS) targets an external host instead.
// The description reaches test workers as JSON in PASEO_TEST_RIG (see rig.ts).
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
  mkdirSync,
} from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { RigInfo } from "./rig.js";
import {
  NOISY_USER,
  TEST_USER,
  createUserSteps,
  noisyRcSteps,
  prepareUserSteps,
  sshdConfigText,
  type UserSetupStep,
} from "./sshd-config.js";

const SSHD = "/usr/sbin/sshd";
export const ENCRYPTED_KEY_PASSPHRASE = "rig-passphrase";

// Stops sshd if this vitest process dies without running teardown (SIGKILL, a timeout), so no
// orphaned sshd outlives a run. Exits by itself once sshd is gone.
const WATCHDOG = `
const [parent, child] = process.argv.slice(1).map(Number);
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch (e) { return e.code === "EPERM"; } };
setInterval(() => {
  if (!alive(child)) process.exit(0);
  if (!alive(parent)) { try { process.kill(child, "SIGTERM"); } catch {} process.exit(0); }
}, 500);
`;

const sh = (cmd: string, args: string[]) => execFileSync(cmd, args, { stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 }).toString();

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: "127.0.0.1", port });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

function homeOf(user: string): string {
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${user}:`));
  if (!line) throw new Error(`no passwd entry for ${user}`);
  return line.split(":")[5]!;
}

function applySteps(steps: UserSetupStep[]): void {
  for (const step of steps) {
    if ("run" in step) {
      sh(step.run[0]!, step.run.slice(1));
    } else {
      writeFileSync(step.write, step.content);
      sh("chown", [`${step.owner}:`, step.write]);
    }
  }
}

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

function keygen(path: string, type: string, passphrase = ""): string {
  sh("ssh-keygen", ["-q", "-t", type, "-N", passphrase, "-C", "paseo-rig", "-f", path]);
  return readFileSync(`${path}.pub`, "utf8").trim();
}

function externalRig(): RigInfo {
  const env = process.env;
  const tmpDir = mkdtempSync(join(tmpdir(), "paseo-rig-ext-"));
  const knownHostsFile = env.PASEO_TEST_SSH_KNOWN_HOSTS ?? join(userInfo().homedir, ".ssh", "known_hosts");
  const hashed = join(tmpDir, "known_hosts.hashed");
  copyFileSync(knownHostsFile, hashed);
  sh("ssh-keygen", ["-H", "-f", hashed]);
  return {
    external: true,
    host: env.PASEO_TEST_SSH_HOST!,
    port: Number(env.PASEO_TEST_SSH_PORT ?? 22),
    user: env.PASEO_TEST_SSH_USER ?? userInfo().username,
    identityFile: env.PASEO_TEST_SSH_IDENTITY ?? join(userInfo().homedir, ".ssh", "id_ed25519"),
    encryptedIdentityFile: null,
    encryptedPassphrase: ENCRYPTED_KEY_PASSPHRASE,
    knownHostsFile,
    hashedKnownHostsFile: hashed,
    hostPublicKeys: [],
    sshdLog: null,
    tmpDir,
    remoteHome: null,
    noisyUser: null,
    noisyUserSkipReason: "external host: no rc-noise user",
    ptySkipReason: null,
    runId: randomBytes(4).toString("hex"),
  };
}

export default async function setup(): Promise<() => Promise<void>> {
  if (process.env.PASEO_TEST_SSH_HOST) {
    const info = externalRig();
    process.env.PASEO_TEST_RIG = JSON.stringify(info);
    return async () => rmSync(info.tmpDir, { recursive: true, force: true });
  }
  if (!existsSync(SSHD)) throw new Error(`${SSHD} is missing: install openssh-server (or set PASEO_TEST_SSH_HOST)`);
  const isRoot = process.getuid?.() === 0;
  const tmpDir = mkdtempSync(join(tmpdir(), "paseo-rig-"));
  // sshd reads AuthorizedKeysFile as the target user, so the directory must be traversable.
  chmodSync(tmpDir, 0o755);

  let user = userInfo().username;
  let remoteHome = userInfo().homedir;
  let noisyUser: string | null = null;
  let noisyUserSkipReason: string | null = "not running as root: cannot create a second login user";
  if (isRoot) {
    remoteHome = ensureUser(TEST_USER);
    user = TEST_USER;
    applySteps(noisyRcSteps(NOISY_USER, ensureUser(NOISY_USER)));
    noisyUser = NOISY_USER;
    noisyUserSkipReason = null;
    mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  }

  const hostPublicKeys = [keygen(join(tmpDir, "ssh_host_ed25519_key"), "ed25519"), keygen(join(tmpDir, "ssh_host_ecdsa_key"), "ecdsa")];
  const identityFile = join(tmpDir, "id_ed25519");
  const encryptedIdentityFile = join(tmpDir, "id_encrypted");
  const authorized = [keygen(identityFile, "ed25519"), keygen(encryptedIdentityFile, "ed25519", ENCRYPTED_KEY_PASSPHRASE)];
  writeFileSync(join(tmpDir, "authorized_keys"), authorized.join("\n") + "\n", { mode: 0o644 });

  const port = await freePort();
  const name = `[127.0.0.1]:${port}`;
  const knownHostsFile = join(tmpDir, "known_hosts");
  writeFileSync(knownHostsFile, hostPublicKeys.map((k) => `${name} ${k.split(" ").slice(0, 2).join(" ")}`).join("\n") + "\n");
  const hashedKnownHostsFile = join(tmpDir, "known_hosts.hashed");
  copyFileSync(knownHostsFile, hashedKnownHostsFile);
  sh("ssh-keygen", ["-q", "-H", "-f", hashedKnownHostsFile]);
  rmSync(`${hashedKnownHostsFile}.old`, { force: true });

  const users = noisyUser ? [user, noisyUser] : [user];
  const configFile = join(tmpDir, "sshd_config");
  // OpenSSH >= 9.8 penalises sources whose connections fail pre-auth (our host-key tests do
  // that on purpose); older versions reject the keyword, so keep it only if sshd accepts it.
  const config = (perSourcePenaltiesOff: boolean) =>
    sshdConfigText({
      port,
      listenAddress: "127.0.0.1",
      hostKeys: [join(tmpDir, "ssh_host_ed25519_key"), join(tmpDir, "ssh_host_ecdsa_key")],
      pidFile: join(tmpDir, "sshd.pid"),
      authorizedKeysFile: join(tmpDir, "authorized_keys"),
      allowUsers: users,
      perSourcePenaltiesOff,
    });
  writeFileSync(configFile, config(true));
  try {
    sh(SSHD, ["-t", "-f", configFile]);
  } catch {
    writeFileSync(configFile, config(false));
    sh(SSHD, ["-t", "-f", configFile]);
  }

  const sshdLog = join(tmpDir, "sshd.log");
  writeFileSync(sshdLog, "");
  chmodSync(sshdLog, 0o644);
  const errFd = openSync(join(tmpDir, "sshd.stderr"), "a");
  const sshd: ChildProcess = spawn(SSHD, ["-D", "-f", configFile, "-E", sshdLog], { stdio: ["ignore", errFd, errFd] });
  spawn(process.execPath, ["-e", WATCHDOG, String(process.pid), String(sshd.pid)], { stdio: "ignore", detached: true }).unref();
  const deadline = Date.now() + 10_000;
  while (!(await canConnect(port))) {
    if (sshd.exitCode !== null || Date.now() > deadline) {
      sshd.kill("SIGKILL");
      throw new Error(
        `sshd did not start on port ${port}: ${readFileSync(sshdLog, "utf8")}${readFileSync(join(tmpDir, "sshd.stderr"), "utf8")}`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  const info: RigInfo = {
    external: false,
    host: "127.0.0.1",
    port,
    user,
    identityFile,
    encryptedIdentityFile,
    encryptedPassphrase: ENCRYPTED_KEY_PASSPHRASE,
    knownHostsFile,
    hashedKnownHostsFile,
    hostPublicKeys,
    sshdLog,
    tmpDir,
    remoteHome,
    noisyUser,
    noisyUserSkipReason,
    ptySkipReason: isRoot ? null : "sshd not started as root cannot allocate pseudo-terminals",
    runId: randomBytes(4).toString("hex"),
  };
  process.env.PASEO_TEST_RIG = JSON.stringify(info);

  return async () => {
    if (sshd.exitCode === null) {
      const exited = new Promise((r) => sshd.once("exit", r));
      sshd.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
      if (sshd.exitCode === null) sshd.kill("SIGKILL");
    }
    if (process.env.PASEO_TEST_KEEP_RIG) return;
    rmSync(tmpDir, { recursive: true, force: true });
    // This run's remote roots (the run id keeps concurrent runs on one machine apart).
    for (const home of isRoot ? [remoteHome, homeOf(NOISY_USER)] : [remoteHome]) {
      for (const name of readdirSync(home)) {
        if (name.startsWith(`.paseo-ssh-test-${info.runId}`)) rmSync(join(home, name), { recursive: true, force: true });
      }
    }
  };
}
