// There is no Docker engine where these tests usually run, so the compose rig is proven by
// cross-checking its files: the generated sshd_config and user set-up must equal what
// test/rig/sshd-config.ts produces (the same generator as the local rig), and compose.yaml, the
// Dockerfile, the entrypoint and the runner must agree on ports, user, key paths and variables.
// PASEO_UPDATE_DOCKER_ASSETS=1 rewrites the generated files instead of comparing them.
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { userInfo } from "node:os";
import { dirname, join } from "node:path";
import { parse as parseYaml } from "yaml";
import {
  CONTAINER,
  NOISY_USER,
  TEST_USER,
  containerSshdConfig,
  containerUserSetupScript,
  applyUserSteps,
  localSshdConfig,
  noisyRcSteps,
  parseSshdConfig,
  sshdConfigText,
  userStepsScript,
} from "../rig/sshd-config.js";
import { needsOpenSsh, openSshOnly } from "../rig/needs-openssh.js";
import { needs, unless } from "../support/needs.js";
import { rig } from "../rig/rig.js";
import { SSHD_PATH, sshdInstalled } from "../rig/server-choice.js";

const root = join(import.meta.dirname, "..", "..");
const docker = (name: string) => join(root, "test", "docker", name);
const read = (path: string) => readFileSync(path, "utf8");

const generated: Array<[file: string, text: () => string]> = [
  ["sshd_config", containerSshdConfig],
  ["setup-users.sh", containerUserSetupScript],
];
if (process.env.PASEO_UPDATE_DOCKER_ASSETS === "1") {
  for (const [file, text] of generated) writeFileSync(docker(file), text());
}

/** Dockerfile instructions with continuation lines joined; comments dropped. */
function dockerInstructions(): Array<{ op: string; args: string }> {
  const joined = read(docker("Dockerfile"))
    .split("\n")
    .filter((line) => !line.trim().startsWith("#"))
    .join("\n")
    .replace(/\\\n/g, " ");
  return joined
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const [op, ...rest] = line.split(/\s+/);
      return { op: op!.toUpperCase(), args: rest.join(" ") };
    });
}

function composeService(name = "sshd"): Record<string, any> {
  const compose = parseYaml(read(join(root, "compose.yaml"))) as { services: Record<string, Record<string, any>> };
  expect(Object.keys(compose.services)).toEqual(["sshd", "bastion"]);
  return compose.services[name]!;
}

describe("compose sshd rig assets", () => {
  const s = suite();

  it.each(generated)("%s is generated from test/rig/sshd-config.ts", (file, text) => {
    expect(read(docker(file))).toBe(text());
  });

  it("the container sshd_config is the rig's config for the container's paths and users", () => {
    const config = parseSshdConfig(read(docker("sshd_config")));
    expect(config.get("Port")).toEqual([[String(CONTAINER.port)]]);
    expect(config.get("AllowUsers")).toEqual([[TEST_USER, NOISY_USER]]);
    expect(config.get("AuthorizedKeysFile")).toEqual([[CONTAINER.authorizedKeysFile]]);
    expect(config.get("HostKey")).toEqual(CONTAINER.hostKeys.map((k) => [k]));
    expect(config.get("PasswordAuthentication")).toEqual([["no"]]);
    expect(config.get("PermitRootLogin")).toEqual([["no"]]);
  });

  it("the generator's output is accepted by sshd -t", (ctx) => {
    if (!sshdInstalled()) ctx.skip(openSshOnly(`${SSHD_PATH} -t checks the generated config`));
    const tmp = s.tmp("paseo-sshd-config-");
    const hostKey = join(tmp, "host_key");
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", hostKey]);
    const file = join(tmp, "sshd_config");
    writeFileSync(
      file,
      sshdConfigText({
        port: 2222,
        listenAddress: "127.0.0.1",
        hostKeys: [hostKey],
        pidFile: join(tmp, "pid"),
        authorizedKeysFile: join(tmp, "authorized_keys"),
        allowUsers: [TEST_USER],
      }),
    );
    expect(() => execFileSync(SSHD_PATH, ["-t", "-f", file], { stdio: "pipe" })).not.toThrow();
  });

  it("setup-users.sh is valid sh that creates both users with the login shell", () => {
    execFileSync("sh", ["-n", docker("setup-users.sh")]);
    const script = read(docker("setup-users.sh"));
    for (const user of [TEST_USER, NOISY_USER]) {
      expect(script).toContain(`useradd -m -s /bin/bash ${user}\n`);
      expect(script).toContain(`chown ${user}: ${CONTAINER.homeOf(user)}\n`);
    }
    expect(script).toContain(`${CONTAINER.homeOf(NOISY_USER)}/.bashrc`);
  });

  it("the script (container) and applyUserSteps (local rig) write the same rc files byte for byte", () => {
    const viaScript = s.tmp("paseo-user-steps-");
    const viaApply = s.tmp("paseo-user-steps-");
    const me = userInfo().username;
    execFileSync("sh", ["-c", userStepsScript(noisyRcSteps(me, viaScript))]);
    const commands: string[] = [];
    applyUserSteps(noisyRcSteps(me, viaApply), (command, args) => {
      commands.push(command);
      execFileSync(command, args);
    });
    expect(commands).toEqual(["chown", "chown", "chown", "chown"]);
    for (const step of noisyRcSteps(me, "")) {
      if (!("write" in step)) continue;
      expect(read(join(viaScript, step.write))).toBe(step.content);
      expect(read(join(viaApply, step.write))).toBe(step.content);
    }
  });

  it(
    "the running local rig's sshd_config is exactly the generator's",
    unless(needs.localHost("reads the local rig's sshd_config")),
    (ctx) => {
      needsOpenSsh(ctx, "the rig runs the embedded server, with no sshd_config");
      const r = rig();
      const text = read(join(r.tmpDir, "sshd_config"));
      const users = parseSshdConfig(text).get("AllowUsers")![0]!;
      expect(text).toBe(localSshdConfig(r.tmpDir, r.port, users, text.includes("PerSourcePenalties no")));
    },
  );

  it("the local rig's config differs from the container's only in addresses, paths and penalties", () => {
    const local = parseSshdConfig(localSshdConfig("/tmp/rig", 40022, [TEST_USER, NOISY_USER], true));
    const container = parseSshdConfig(containerSshdConfig());
    const differing = ["Port", "ListenAddress", "HostKey", "PidFile", "AuthorizedKeysFile", "PerSourcePenalties"];
    for (const keyword of new Set([...local.keys(), ...container.keys()])) {
      if (!differing.includes(keyword)) expect(local.get(keyword), keyword).toEqual(container.get(keyword));
    }
    expect(local.get("ListenAddress")).toEqual([["127.0.0.1"]]);
    expect(local.get("PerSourcePenalties")).toEqual([["no"]]);
  });

  it("the Dockerfile builds a Debian image with sshd, node and git from the generated assets", () => {
    const steps = dockerInstructions();
    const args = (op: string) => steps.filter((s) => s.op === op).map((s) => s.args);
    // The base is a build argument defaulting to a registry's node image; the packages come from
    // apt only where the base lacks them (a local debootstrap base has them already).
    expect(args("ARG")).toEqual([expect.stringMatching(/^BASE=node:\d+-(bookworm|trixie)(-slim)?$/)]);
    expect(args("FROM")).toEqual(["${BASE}"]);
    const runs = args("RUN").join("\n");
    expect(runs).toMatch(/packages="[^"\n]*\bopenssh-server\b[^"\n]*\bgit\b[^"\n]*"/);
    expect(runs).toContain('command -v node >/dev/null || packages="$packages nodejs"');
    expect(runs).toMatch(/apt-get install -y --no-install-recommends \$missing/);
    expect(args("COPY")).toEqual(
      expect.arrayContaining([
        `sshd_config ${CONTAINER.sshdConfigPath}`,
        "setup-users.sh /usr/local/sbin/paseo-setup-users.sh",
        "entrypoint.sh /usr/local/sbin/paseo-sshd-entrypoint",
      ]),
    );
    expect(runs).toContain("sh /usr/local/sbin/paseo-setup-users.sh");
    for (const key of CONTAINER.hostKeys) expect(runs).toContain(`-f ${key}`);
    expect(runs).toContain(`mkdir -p /run/sshd ${dirname(CONTAINER.authorizedKeysFile)}`);
    expect(runs).toContain(`sshd -t -f ${CONTAINER.sshdConfigPath}`);
    expect(args("EXPOSE")).toEqual([String(CONTAINER.port)]);
    expect(args("ENTRYPOINT")).toEqual(['["/usr/local/sbin/paseo-sshd-entrypoint"]']);
  });

  it("CI's local base has every package the Dockerfile would install, so its build needs no network", () => {
    const runs = dockerInstructions()
      .filter((s) => s.op === "RUN")
      .map((s) => s.args)
      .join("\n");
    const wanted = [...runs.match(/packages="([^"]+)"/)![1]!.split(" "), "nodejs"];
    const pass = read(join(root, ".ci", "compose-pass"));
    const base = /^BASE_PACKAGES=(\S+)$/m.exec(pass)![1]!.split(",");
    expect([...base].sort()).toEqual([...wanted].sort());
    // The runner's default base is compose.yaml's.
    const composeDefault = /PASEO_COMPOSE_BASE_IMAGE:-([^}]+)\}/.exec(read(join(root, "compose.yaml")))![1]!;
    expect(read(docker("run-compose.mjs"))).toContain(`process.env.PASEO_COMPOSE_BASE_IMAGE || "${composeDefault}"`);
  });

  it("the entrypoint authorizes the runner's key where sshd_config looks and starts that config", () => {
    execFileSync("sh", ["-n", docker("entrypoint.sh")]);
    const entry = read(docker("entrypoint.sh"));
    expect(entry).toContain(`"$PASEO_AUTHORIZED_KEY" > ${CONTAINER.authorizedKeysFile}\n`);
    expect(entry).toContain(`exec /usr/sbin/sshd -D -e -f ${CONTAINER.sshdConfigPath}\n`);
  });

  it("compose.yaml publishes the container's sshd port on loopback and passes the runner's key", () => {
    const sshd = composeService();
    expect(sshd.build).toEqual({
      context: "test/docker",
      dockerfile: "Dockerfile",
      args: { BASE: "${PASEO_COMPOSE_BASE_IMAGE:-node:20-bookworm-slim}" },
    });
    expect(existsSync(join(root, sshd.build.context, sshd.build.dockerfile))).toBe(true);
    expect(sshd.ports).toHaveLength(1);
    const [ip, hostPort, containerPort] = (sshd.ports[0] as string).split(/:(?![^{]*\})/);
    expect(ip).toBe("127.0.0.1");
    expect(hostPort).toMatch(/^\$\{PASEO_COMPOSE_SSH_PORT(:-\d+)?\}$/);
    expect(containerPort).toBe(String(CONTAINER.port));
    expect(sshd.environment).toEqual({ PASEO_AUTHORIZED_KEY: expect.stringMatching(/^\$\{PASEO_COMPOSE_AUTHORIZED_KEY[:?}]/) });
    expect(sshd.healthcheck.test.join(" ")).toContain(`/dev/tcp/127.0.0.1/${CONTAINER.port}`);
  });

  it("the bastion is the same server image on its own loopback port, with the runner's key", () => {
    const sshd = composeService();
    const bastion = composeService("bastion");
    expect(bastion.build).toEqual(sshd.build);
    expect(bastion.image).toBe(sshd.image);
    expect(bastion.environment).toEqual(sshd.environment);
    expect(bastion.healthcheck).toEqual(sshd.healthcheck);
    const [ip, hostPort, containerPort] = (bastion.ports[0] as string).split(/:(?![^{]*\})/);
    expect(ip).toBe("127.0.0.1");
    expect(hostPort).toMatch(/^\$\{PASEO_COMPOSE_BASTION_PORT(:-\d+)?\}$/);
    expect(hostPort).not.toBe((sshd.ports[0] as string).split(/:(?![^{]*\})/)[1]);
    expect(containerPort).toBe(String(CONTAINER.port));
  });

  it("the runner writes the jump config the compose jump test reads, reaching the target by its service name", () => {
    const runner = read(docker("run-compose.mjs"));
    const jumpTest = read(join(root, "test", "transport", "compose-jump.test.ts"));
    for (const name of ["PASEO_TEST_JUMP_SSH_CONFIG", "PASEO_TEST_JUMP_HOST"]) {
      expect(runner).toContain(`${name}:`);
      expect(jumpTest).toContain(`process.env.${name}`);
    }
    expect(runner).toContain("HostName sshd");
    expect(runner).toContain("ProxyJump paseo-compose-bastion");
    expect(runner).toMatch(/\["bastion", \[`\[127\.0\.0\.1\]:\$\{bastionPort\}`\]\]/);
  });

  it("the runner feeds compose the variables it interpolates and the rig the variables it reads", () => {
    const runner = read(docker("run-compose.mjs"));
    const compose = read(join(root, "compose.yaml"));
    for (const name of compose.match(/\$\{(PASEO_[A-Z_]+)/g)!.map((m) => m.slice(2))) expect(runner).toContain(`${name}:`);
    const rig = read(join(root, "test", "rig", "global-setup.ts"));
    const rigVariables = new Set(rig.match(/PASEO_TEST_SSH_[A-Z_]+/g));
    const runnerVariables = new Set(runner.match(/PASEO_TEST_SSH_[A-Z_]+/g));
    expect([...runnerVariables].sort()).toEqual([
      "PASEO_TEST_SSH_CONTAINER",
      "PASEO_TEST_SSH_HOST",
      "PASEO_TEST_SSH_IDENTITY",
      "PASEO_TEST_SSH_KNOWN_HOSTS",
      "PASEO_TEST_SSH_PORT",
      "PASEO_TEST_SSH_USER",
    ]);
    for (const name of runnerVariables) expect(rigVariables.has(name)).toBe(true);
  });
});
