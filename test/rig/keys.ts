// The rig's credentials, the same whichever server it starts: fresh host keys (ed25519 and ECDSA),
// an unencrypted and a passphrase-protected client key, their authorized_keys, and known_hosts for
// the server's address, plain and hashed (the `ssh-keygen -H` form). Made with ssh2, so the rig
// needs none of OpenSSH's tools where it runs the embedded server.
import { writeFileSync } from "node:fs";
import { createHmac, randomBytes } from "node:crypto";
import { join } from "node:path";
import { generateKeyPair } from "../../src/demo/key-pair.js";

export const ENCRYPTED_KEY_PASSPHRASE = "rig-passphrase";
/** Host key files in the rig directory, in the order sshd_config lists them. */
export const HOST_KEY_NAMES = ["ssh_host_ed25519_key", "ssh_host_ecdsa_key"];

export interface RigKeys {
  hostKeyFiles: string[];
  /** `type base64 comment` lines, one per host key. */
  hostPublicKeys: string[];
  identityFile: string;
  encryptedIdentityFile: string;
  /** Public key lines of both client keys. */
  authorizedKeys: string[];
  authorizedKeysFile: string;
}

function writeKeyPair(path: string, pair: { private: string; public: string }): string {
  writeFileSync(path, pair.private, { mode: 0o600 });
  writeFileSync(`${path}.pub`, pair.public + "\n", { mode: 0o644 });
  return pair.public.trim();
}

export function writeRigKeys(dir: string): RigKeys {
  const comment = "paseo-rig";
  const hostKeyFiles = HOST_KEY_NAMES.map((name) => join(dir, name));
  const hostPublicKeys = [
    writeKeyPair(hostKeyFiles[0]!, generateKeyPair({ type: "ed25519", comment })),
    writeKeyPair(hostKeyFiles[1]!, generateKeyPair({ type: "ecdsa", bits: 256, comment })),
  ];
  const identityFile = join(dir, "id_ed25519");
  const encryptedIdentityFile = join(dir, "id_encrypted");
  const authorizedKeys = [
    writeKeyPair(identityFile, generateKeyPair({ type: "ed25519", comment })),
    writeKeyPair(
      encryptedIdentityFile,
      generateKeyPair({ type: "ed25519", comment, passphrase: ENCRYPTED_KEY_PASSPHRASE, cipher: "aes256-ctr" }),
    ),
  ];
  const authorizedKeysFile = join(dir, "authorized_keys");
  // sshd reads it as the target user.
  writeFileSync(authorizedKeysFile, authorizedKeys.join("\n") + "\n", { mode: 0o644 });
  return { hostKeyFiles, hostPublicKeys, identityFile, encryptedIdentityFile, authorizedKeys, authorizedKeysFile };
}

/**
 * A fresh unencrypted ed25519 key pair at `path` and `path`.pub, as `ssh-keygen -q -N ""` writes
 * one (made with ssh2: a fresh machine has no ssh-keygen). Returns the public key as `type base64`.
 */
export function writeKeyFile(path: string): string {
  return writeKeyPair(path, generateKeyPair({ type: "ed25519" }))
    .split(" ")
    .slice(0, 2)
    .join(" ");
}

/** `|1|salt|hash` as `ssh-keygen -H` writes it: base64 salt and base64 HMAC-SHA1(salt, name). */
export function hashedHostName(name: string, salt = randomBytes(20)): string {
  return `|1|${salt.toString("base64")}|${createHmac("sha1", salt).update(name).digest("base64")}`;
}

export function writeKnownHosts(
  dir: string,
  port: number,
  hostPublicKeys: string[],
): { knownHostsFile: string; hashedKnownHostsFile: string } {
  const name = `[127.0.0.1]:${port}`;
  const keys = hostPublicKeys.map((k) => k.split(" ").slice(0, 2).join(" "));
  const knownHostsFile = join(dir, "known_hosts");
  writeFileSync(knownHostsFile, keys.map((k) => `${name} ${k}\n`).join(""));
  const hashedKnownHostsFile = join(dir, "known_hosts.hashed");
  writeFileSync(hashedKnownHostsFile, keys.map((k) => `${hashedHostName(name)} ${k}\n`).join(""));
  return { knownHostsFile, hashedKnownHostsFile };
}
