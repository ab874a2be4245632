// `npm run test:compose [-- <vitest args>]`: runs the vitest suites against the compose sshd
// container instead of the local rig. Generates a throw-away client key, starts the service with
// that public key authorized on a free local port, trusts exactly the container's host keys, runs
// vitest with the rig's external-host variables, and always tears the container and keys down.
// User and host-key paths come from the generated test/docker/sshd_config (test/rig/sshd-config.ts).
import { spawn, execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import ssh2 from "ssh2";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const execFileAsync = promisify(execFile);
const COMPOSE = ["compose", "-f", join(root, "compose.yaml")];
const STEP_TIMEOUT_MS = 10 * 60_000;
const VITEST_TIMEOUT_MS = 60 * 60_000;

function sshdSetting(text, keyword) {
  return text
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter(([k]) => k === keyword)
    .map(([, ...values]) => values);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function docker(args, env) {
  try {
    return (await execFileAsync("docker", [...COMPOSE, ...args], { env, timeout: STEP_TIMEOUT_MS, maxBuffer: 64 << 20 })).stdout;
  } catch (err) {
    const detail = (err.stderr || err.message || String(err)).trim().split("\n").slice(-5).join("; ");
    throw new Error(`docker ${args[0]} failed: ${detail}`);
  }
}

function runVitest(args, env) {
  return new Promise((resolve) => {
    const child = spawn("npx", ["vitest", "run", ...args], { cwd: root, env, stdio: "inherit" });
    const timer = setTimeout(() => child.kill("SIGTERM"), VITEST_TIMEOUT_MS);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? (signal ? 1 : 0));
    });
  });
}

// ssh2 now and then writes an ed25519 key with a 31-byte public half that nothing reads back
// (src/demo/key-pair.ts, which this plain script cannot import, says more): take one that parses.
function readableEd25519Key() {
  for (let i = 0; i < 20; i++) {
    const key = ssh2.utils.generateKeyPairSync("ed25519");
    if (!(ssh2.utils.parseKey(key.public) instanceof Error) && !(ssh2.utils.parseKey(key.private) instanceof Error)) return key;
  }
  throw new Error("ssh2 could not generate a readable ed25519 key");
}

async function main() {
  const config = readFileSync(join(root, "test/docker/sshd_config"), "utf8");
  const user = sshdSetting(config, "AllowUsers")[0]?.[0];
  const hostKeys = sshdSetting(config, "HostKey").map(([path]) => path);
  if (!user || hostKeys.length === 0) throw new Error("test/docker/sshd_config lacks AllowUsers or HostKey");

  const tmp = mkdtempSync(join(tmpdir(), "paseo-compose-"));
  const port = await freePort();
  const bastionPort = await freePort();
  const key = readableEd25519Key();
  const identityFile = join(tmp, "id_ed25519");
  writeFileSync(identityFile, key.private, { mode: 0o600 });
  const env = {
    ...process.env,
    PASEO_COMPOSE_SSH_PORT: String(port),
    PASEO_COMPOSE_BASTION_PORT: String(bastionPort),
    PASEO_COMPOSE_AUTHORIZED_KEY: key.public.trim(),
  };

  let up = false;
  try {
    await execFileAsync("docker", ["info", "--format", "{{.ServerVersion}}"], { timeout: 30_000 }).catch((err) => {
      const detail = (err.stderr || err.message || String(err)).trim().split("\n")[0];
      throw new Error(`no Docker engine reachable (${detail}); start one, or use the local rig: npm test`);
    });
    up = true;
    process.stderr.write(`test:compose: starting the sshd container on 127.0.0.1:${port}\n`);
    await docker(["up", "--detach", "--build", "--wait", "--wait-timeout", "120"], env);
    const knownHosts = [];
    // The target is known as 127.0.0.1:<port> from here and as `sshd` from the bastion.
    for (const [service, names] of [
      ["sshd", [`[127.0.0.1]:${port}`, "sshd"]],
      ["bastion", [`[127.0.0.1]:${bastionPort}`]],
    ]) {
      for (const path of hostKeys) {
        const pub = (await docker(["exec", "-T", service, "cat", `${path}.pub`], env)).trim().split(/\s+/);
        for (const name of names) knownHosts.push(`${name} ${pub[0]} ${pub[1]}`);
      }
    }
    const knownHostsFile = join(tmp, "known_hosts");
    writeFileSync(knownHostsFile, knownHosts.join("\n") + "\n");
    const sshConfig = join(tmp, "ssh_config");
    const common = `  User ${user}\n  IdentityFile ${identityFile}\n  IdentitiesOnly yes\n  UserKnownHostsFile ${knownHostsFile}\n`;
    writeFileSync(
      sshConfig,
      `Host paseo-compose-bastion\n  HostName 127.0.0.1\n  Port ${bastionPort}\n${common}` +
        `Host paseo-compose-target\n  HostName sshd\n  Port 22\n  ProxyJump paseo-compose-bastion\n${common}`,
    );
    return await runVitest(process.argv.slice(2), {
      ...process.env,
      PASEO_TEST_SSH_HOST: "127.0.0.1",
      PASEO_TEST_SSH_PORT: String(port),
      PASEO_TEST_SSH_USER: user,
      PASEO_TEST_SSH_IDENTITY: identityFile,
      PASEO_TEST_SSH_KNOWN_HOSTS: knownHostsFile,
      PASEO_TEST_JUMP_SSH_CONFIG: sshConfig,
      PASEO_TEST_JUMP_HOST: "paseo-compose-target",
    });
  } finally {
    if (up)
      await docker(["down", "--volumes", "--remove-orphans", "--timeout", "5"], env).catch((err) =>
        process.stderr.write(`test:compose: ${err.message}\n`),
      );
    rmSync(tmp, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`test:compose: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
