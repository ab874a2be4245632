// Logins counted in the rig sshd's log for one test's own client key. With several vitest workers
// the rig's sshd serves other files' connections at the same time, so a test that proves "one
// login" counts only the `Accepted publickey` lines of a key no other test uses (sshd names the
// key's fingerprint in each, at LogLevel VERBOSE). Only the local OpenSSH rig has such a log; on
// other servers the rig's own key is used and nothing is counted.
import type { Cleanups } from "./suite.js";
import { createHash } from "node:crypto";
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rig, sshdLogSince } from "../rig/rig.js";
import { writeKeyFile } from "../rig/keys.js";

export interface OwnLogin {
  identityFile: string;
  /** Logins with this key in sshd's log since `offset` (sshdLogOffset()); 0 where there is no log. */
  loginsSince(offset: number): number;
}

/** OpenSSH's `SHA256:` fingerprint of a `type base64` public key (unpadded base64 of the blob's hash). */
export function sha256Fingerprint(publicKey: string): string {
  const blob = Buffer.from(publicKey.split(" ")[1] ?? "", "base64");
  return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;
}

/** A client key of the test's own, authorized for the rig user; removed by `cleanups`. */
export function ownLogin(cleanups: Cleanups): OwnLogin {
  const r = rig();
  if (!r.sshdLog || r.external) return { identityFile: r.identityFile, loginsSince: () => 0 };
  const dir = mkdtempSync(join(tmpdir(), "paseo-own-login-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const identityFile = join(dir, "id_ed25519");
  const publicKey = writeKeyFile(identityFile);
  // One write of one whole line: sshd, reading the file for another login meanwhile, sees it or not.
  appendFileSync(join(r.tmpDir, "authorized_keys"), `${publicKey}\n`);
  const fingerprint = sha256Fingerprint(publicKey);
  return {
    identityFile,
    loginsSince: (offset) =>
      sshdLogSince(offset)
        .split("\n")
        .filter((line) => line.includes("Accepted publickey") && line.includes(fingerprint)).length,
  };
}
