// `npm run test:compose [-- <vitest args>]`: runs the vitest suites against the compose sshd
// container instead of the local rig. Generates a throw-away client key, starts the service with
// that public key authorized on a free local port, trusts exactly the container's host keys, runs
// vitest with the rig's external-host variables, and always tears the container and keys down.
// User and host-key paths come from the generated test/docker/sshd_config (test/rig/sshd-config.ts).
// Works with `docker compose` (v2) and, where only that exists, the older `docker-compose`: it uses
// no option v1 lacks (it waits for the health checks itself instead of `up --wait`).
// PASEO_COMPOSE_BASE_IMAGE names the image's base (default node:20-bookworm-slim from a registry;
// .ci/compose-pass builds a local one from Debian packages where no registry is reachable).
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
const PROJECT = "paseo-ssh-runtime-test";
const STEP_TIMEOUT_MS = 10 * 60_000;
const HEALTHY_TIMEOUT_MS = 120_000;
const VITEST_TIMEOUT_MS = 60 * 60_000;

const log = (line) => process.stderr.write(`test:compose: ${line}\n`);

/** Runs a step and logs how long it took (CI reads these figures). */
async function timed(label, step) {
  const started = Date.now();
  try {
    return await step();
  } finally {
    log(`${label}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
}

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

/** A command's stdout; on failure, an error naming `label` with the last lines of its stderr. */
async function run(label, command, args, env) {
  try {
    return (await execFileAsync(command, args, { env, timeout: STEP_TIMEOUT_MS, maxBuffer: 64 << 20 })).stdout;
  } catch (err) {
    const detail = (err.stderr || err.message || String(err)).trim().split("\n").slice(-5).join("; ");
    throw new Error(`${label} failed: ${detail}`);
  }
}

/** `docker compose` when the v2 plugin is there, else `docker-compose` (v1 or v2 standalone). */
async function composeCommand() {
  const file = ["-f", join(root, "compose.yaml"), "-p", PROJECT];
  for (const [command, prefix] of [
    ["docker", ["compose"]],
    ["docker-compose", []],
  ]) {
    const version = await execFileAsync(command, [...prefix, "version", "--short"], { timeout: 30_000 }).then(
      (r) => r.stdout.trim(),
      () => null,
    );
    if (version) return { name: `${[command, ...prefix].join(" ")} ${version}`, command, args: [...prefix, ...file] };
  }
  throw new Error("neither `docker compose` nor `docker-compose` is installed (apt-get install docker-compose, or the compose plugin)");
}

/** Polls the containers' health checks (compose.yaml) until all pass; bounded. */
async function waitHealthy(ids) {
  const deadline = Date.now() + HEALTHY_TIMEOUT_MS;
  for (;;) {
    const states = (await run("docker inspect", "docker", ["inspect", "--format", "{{.State.Status}} {{.State.Health.Status}}", ...ids]))
      .trim()
      .split("\n");
    if (states.every((s) => s === "running healthy")) return;
    if (states.some((s) => s.startsWith("exited") || s.startsWith("dead") || s.endsWith(" unhealthy")))
      throw new Error(`a container did not start: ${states.join(", ")}`);
    if (Date.now() > deadline) throw new Error(`containers not healthy within ${HEALTHY_TIMEOUT_MS / 1000} s: ${states.join(", ")}`);
    await new Promise((r) => setTimeout(r, 250));
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
    PASEO_COMPOSE_BASE_IMAGE: process.env.PASEO_COMPOSE_BASE_IMAGE || "node:20-bookworm-slim",
  };

  let compose = null;
  try {
    await execFileAsync("docker", ["info", "--format", "{{.ServerVersion}}"], { timeout: 30_000 }).catch((err) => {
      const detail = (err.stderr || err.message || String(err)).trim().split("\n")[0];
      throw new Error(`no Docker engine reachable (${detail}); start one, or use the local rig: npm test`);
    });
    const found = await composeCommand();
    log(`${found.name}; image base ${env.PASEO_COMPOSE_BASE_IMAGE}`);
    await timed("build", () => run("compose build", found.command, [...found.args, "build"], env));
    compose = found;
    log(`starting the sshd container on 127.0.0.1:${port}, the bastion on 127.0.0.1:${bastionPort}`);
    const ids = await timed("start", async () => {
      await run("compose up", compose.command, [...compose.args, "up", "--detach", "--no-build"], env);
      const ids = {};
      for (const service of ["sshd", "bastion"]) {
        ids[service] = (await run("compose ps", compose.command, [...compose.args, "ps", "-q", service], env)).trim();
        if (!ids[service]) throw new Error(`compose started no ${service} container`);
      }
      await waitHealthy(Object.values(ids));
      return ids;
    });
    const knownHosts = [];
    // The target is known as 127.0.0.1:<port> from here and as `sshd` from the bastion.
    for (const [service, names] of [
      ["sshd", [`[127.0.0.1]:${port}`, "sshd"]],
      ["bastion", [`[127.0.0.1]:${bastionPort}`]],
    ]) {
      for (const path of hostKeys) {
        const pub = (await run("docker exec", "docker", ["exec", ids[service], "cat", `${path}.pub`], env)).trim().split(/\s+/);
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
    return await timed("vitest", () =>
      runVitest(process.argv.slice(2), {
        ...process.env,
        PASEO_TEST_SSH_HOST: "127.0.0.1",
        PASEO_TEST_SSH_PORT: String(port),
        PASEO_TEST_SSH_USER: user,
        PASEO_TEST_SSH_IDENTITY: identityFile,
        PASEO_TEST_SSH_KNOWN_HOSTS: knownHostsFile,
        // The target's container: tests that look at the host from the inside do it with docker exec.
        PASEO_TEST_SSH_CONTAINER: ids.sshd,
        PASEO_TEST_JUMP_SSH_CONFIG: sshConfig,
        PASEO_TEST_JUMP_HOST: "paseo-compose-target",
      }),
    );
  } finally {
    if (compose)
      await timed("down", () =>
        run("compose down", compose.command, [...compose.args, "down", "--volumes", "--remove-orphans", "--timeout", "5"], env),
      ).catch((err) => log(err.message));
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
