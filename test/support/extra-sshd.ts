// A second OpenSSH sshd for tests that need a server configured differently from the rig's
// (MaxSessions, stream-local forwarding refused): the rig's host keys, authorized keys and users
// (copied into a directory of its own), its own port, config and log. Lives only as long as the
// test that starts it.
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../rig/global-setup.js";
import { HOST_KEY_NAMES } from "../rig/keys.js";
import { rig } from "../rig/rig.js";
import { startSshd } from "../rig/sshd.js";
import { firstUnmet, needs } from "./needs.js";

export interface ExtraSshd {
  port: number;
  knownHostsFile: string;
  /** Runtime options reaching this server (rig user and key). */
  options(extra?: Record<string, unknown>): Record<string, unknown>;
  /** `Accepted publickey` lines in its log so far: one per SSH connection that logged in. */
  logins(): number;
  stop(): Promise<void>;
}

/** Why an extra sshd cannot run here, or null. */
export function extraSshdSkipReason(): string | null {
  return firstUnmet(
    needs.localHost("starts a second sshd on the rig's host"),
    needs.openssh("starts a second sshd with its own sshd_config"),
    needs.root("a second sshd serves the rig's users"),
  );
}

/** Starts sshd with the rig's set-up plus `lines` (e.g. "MaxSessions 10", "AllowStreamLocalForwarding no"). */
export async function startExtraSshd(lines: string[]): Promise<ExtraSshd> {
  const r = rig();
  const dir = mkdtempSync(join(r.tmpDir, "extra-sshd-"));
  // sshd reads AuthorizedKeysFile as the target user, so the directory must be traversable.
  chmodSync(dir, 0o755);
  for (const name of [...HOST_KEY_NAMES, "authorized_keys"]) copyFileSync(join(r.tmpDir, name), join(dir, name));
  const port = await freePort();
  const sshd = await startSshd(dir, port, [r.user, ...(r.noisyUser ? [r.noisyUser] : [])], lines);
  const knownHostsFile = join(dir, "known_hosts");
  writeFileSync(knownHostsFile, r.hostPublicKeys.map((k) => `[127.0.0.1]:${port} ${k.split(" ").slice(0, 2).join(" ")}\n`).join(""));
  return {
    port,
    knownHostsFile,
    options: (extra = {}) => ({
      host: "127.0.0.1",
      port,
      user: r.user,
      identityFile: r.identityFile,
      knownHostsFile,
      connectTimeoutMs: 10_000,
      ...extra,
    }),
    logins: () => (readFileSync(sshd.log, "utf8").match(/Accepted publickey/g) ?? []).length,
    async stop() {
      await sshd.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
