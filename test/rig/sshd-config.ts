// One source for the OpenSSH server the tests run against: the local rig (global-setup.ts) and
// the compose container (compose.yaml, test/docker/) both take their sshd_config text and their
// login-user set-up from here, so "passes on the rig" and "passes in the container" mean the same
// server. test/compose/assets.test.ts checks the committed Docker assets against this module and
// regenerates them with PASEO_UPDATE_DOCKER_ASSETS=1.
import { writeFileSync } from "node:fs";
import { join } from "node:path";

/** The dedicated non-root login user the tests use when they can create users (root). */
export const TEST_USER = "paseotest";
/** A second login user whose shell start-up files print noise and export variables (S4). */
export const NOISY_USER = "paseonoisy";
export const LOGIN_SHELL = "/bin/bash";

export interface SshdConfigParams {
  port: number;
  listenAddress: string;
  hostKeys: string[];
  pidFile: string;
  authorizedKeysFile: string;
  allowUsers: string[];
  /**
   * OpenSSH >= 9.8 penalises sources whose connections fail before auth (host-key tests do that
   * on purpose); older versions reject the keyword, so callers enable it only where sshd accepts it.
   */
  perSourcePenaltiesOff?: boolean;
}

export function sshdConfigText(p: SshdConfigParams): string {
  return [
    `Port ${p.port}`,
    `ListenAddress ${p.listenAddress}`,
    ...p.hostKeys.map((key) => `HostKey ${key}`),
    `PidFile ${p.pidFile}`,
    "LogLevel VERBOSE",
    "StrictModes no",
    "UsePAM no",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    "PubkeyAuthentication yes",
    "PermitRootLogin no",
    `AuthorizedKeysFile ${p.authorizedKeysFile}`,
    `AllowUsers ${p.allowUsers.join(" ")}`,
    // Tests open many connections at once; the default 10:30:100 would drop some at random.
    "MaxStartups 200",
    "PrintMotd no",
    ...(p.perSourcePenaltiesOff ? ["PerSourcePenalties no"] : []),
    "",
  ].join("\n");
}

/** The local rig's sshd_config: everything lives in the rig's temp dir, sshd on loopback only. */
export function localSshdConfig(tmpDir: string, port: number, allowUsers: string[], perSourcePenaltiesOff: boolean): string {
  return sshdConfigText({
    port,
    listenAddress: "127.0.0.1",
    hostKeys: [join(tmpDir, "ssh_host_ed25519_key"), join(tmpDir, "ssh_host_ecdsa_key")],
    pidFile: join(tmpDir, "sshd.pid"),
    authorizedKeysFile: join(tmpDir, "authorized_keys"),
    allowUsers,
    perSourcePenaltiesOff,
  });
}

/** Reads back the keyword → values of an sshd_config text (one value list per occurrence). */
export function parseSshdConfig(text: string): Map<string, string[][]> {
  const out = new Map<string, string[][]>();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const [keyword, ...values] = line.split(/\s+/);
    const list = out.get(keyword!) ?? [];
    list.push(values);
    out.set(keyword!, list);
  }
  return out;
}

/** One step of preparing a login user, as root. */
export type UserSetupStep = { run: string[] } | { write: string; content: string; owner: string };

/** Steps that create `user` (only when it does not exist yet: the caller checks `id -u`). */
export function createUserSteps(user: string): UserSetupStep[] {
  return [{ run: ["useradd", "-m", "-s", LOGIN_SHELL, user] }];
}

/** Steps that make an existing `user` able to log in with a key, with a usable home. */
export function prepareUserSteps(user: string, home: string): UserSetupStep[] {
  return [
    // sshd without PAM refuses accounts whose password field is locked ("!"); "*" means "no password".
    { run: ["usermod", "-p", "*", user] },
    { run: ["mkdir", "-p", home] },
    { run: ["chown", `${user}:`, home] },
    { run: ["chmod", "755", home] },
  ];
}

const RC_FILES: Array<[file: string, variable: string]> = [
  [".bashrc", "BASHRC"],
  [".profile", "PROFILE"],
  [".zshenv", "ZSHENV"],
  [".bash_profile", "BASH_PROFILE"],
];

/** Shell start-up files of NOISY_USER: each prints to stdout (with and without newline) and exports. */
export function noisyRcSteps(user: string, home: string): UserSetupStep[] {
  return RC_FILES.map(([file, variable]) => ({
    write: `${home}/${file}`,
    content: `echo 'rc-noise: hello from ${file}'; printf 'rc-noise without newline ${file}'; export PASEO_RC_NOISE_${variable}=1\n`,
    owner: user,
  }));
}

/** The full set-up of both test users for a machine where neither exists yet (a fresh image). */
export function freshMachineUserSteps(homeOf: (user: string) => string): UserSetupStep[] {
  return [TEST_USER, NOISY_USER].flatMap((user) => [
    ...createUserSteps(user),
    ...prepareUserSteps(user, homeOf(user)),
    ...(user === NOISY_USER ? noisyRcSteps(user, homeOf(user)) : []),
  ]);
}

/** Performs steps on this machine, as root; `run` executes one command (e.g. execFileSync). */
export function applyUserSteps(steps: UserSetupStep[], run: (command: string, args: string[]) => void): void {
  for (const step of steps) {
    if ("run" in step) {
      run(step.run[0]!, step.run.slice(1));
    } else {
      writeFileSync(step.write, step.content);
      run("chown", [`${step.owner}:`, step.write]);
    }
  }
}

/** Renders steps as a POSIX sh script (for a Dockerfile RUN). */
export function userStepsScript(steps: UserSetupStep[]): string {
  const lines = steps.map((step) =>
    "run" in step
      ? step.run.map(shellWord).join(" ")
      : `printf '%s' ${shellWord(step.content)} > ${shellWord(step.write)} && chown ${shellWord(`${step.owner}:`)} ${shellWord(step.write)}`,
  );
  return [
    "#!/bin/sh",
    "# Generated from test/rig/sshd-config.ts; do not edit (see test/compose/assets.test.ts).",
    "set -eu",
    ...lines,
    "",
  ].join("\n");
}

function shellWord(value: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

/** Where things live inside the compose container (test/docker/Dockerfile, compose.yaml). */
export const CONTAINER = {
  sshdConfigPath: "/etc/ssh/sshd_config",
  port: 22,
  authorizedKeysFile: "/etc/ssh/paseo/authorized_keys",
  homeOf: (user: string) => `/home/${user}`,
  hostKeys: ["/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_ecdsa_key"],
  pidFile: "/run/sshd.pid",
} as const;

/** The container's sshd_config: same server as the local rig, listening on all container addresses. */
export function containerSshdConfig(): string {
  return sshdConfigText({
    port: CONTAINER.port,
    listenAddress: "0.0.0.0",
    hostKeys: [...CONTAINER.hostKeys],
    pidFile: CONTAINER.pidFile,
    authorizedKeysFile: CONTAINER.authorizedKeysFile,
    allowUsers: [TEST_USER, NOISY_USER],
    // The image is Debian bookworm (OpenSSH 9.2), which predates PerSourcePenalties.
    perSourcePenaltiesOff: false,
  });
}

export function containerUserSetupScript(): string {
  return userStepsScript(freshMachineUserSteps(CONTAINER.homeOf));
}
