// What tests use of the SSH rig started by global-setup.ts: connection facts, runtime options
// for the CLI or openHost, and a reader for the sshd log since a remembered offset.
import { randomBytes } from "node:crypto";
import { readFileSync, statSync } from "node:fs";

export interface RigInfo {
  /** OpenSSH's sshd, the embedded ssh2 server (no sshd here), or a host we did not start. */
  server: "openssh" | "embedded" | "external";
  /** Why that server, e.g. "no /usr/sbin/sshd" or "PASEO_TEST_SERVER=embedded". */
  serverBecause: string;
  /** True when PASEO_TEST_SSH_HOST points the tests at a host we did not start. */
  external: boolean;
  /**
   * The Docker container that external host is (PASEO_TEST_SSH_CONTAINER, set by npm run
   * test:compose): tests look inside it through test/support/host-view.ts. Null otherwise.
   */
  container: string | null;
  /** The host's node, as its login user finds it: remote programs are named as the host has them. */
  remoteNode: string;
  host: string;
  port: number;
  user: string;
  identityFile: string;
  /** Authorized key protected by `encryptedPassphrase` (null on an external host). */
  encryptedIdentityFile: string | null;
  encryptedPassphrase: string;
  knownHostsFile: string;
  /** The same entries hashed with `ssh-keygen -H`. */
  hashedKnownHostsFile: string;
  /** Host public keys, `type base64 comment` lines. */
  hostPublicKeys: string[];
  /** sshd's -E log (LogLevel VERBOSE), null on an external host or the embedded server. */
  sshdLog: string | null;
  tmpDir: string;
  /** Home directory of `user` on the host (null if unknown). */
  remoteHome: string | null;
  /** Second authorized user whose rc files print to stdout and export variables. */
  noisyUser: string | null;
  noisyUserSkipReason: string | null;
  /** Why PTY tests cannot run here (an sshd not started as root cannot allocate PTYs), or null. */
  ptySkipReason: string | null;
  /** Unique per test run: remote roots carry it, so concurrent runs on one machine never collide. */
  runId: string;
}

export function rig(): RigInfo {
  const raw = process.env.PASEO_TEST_RIG;
  if (!raw) throw new Error("PASEO_TEST_RIG is not set: run tests through vitest (globalSetup test/rig/global-setup.ts)");
  return JSON.parse(raw) as RigInfo;
}

/** Remote root shared by this run's tests; removed at teardown (rig-managed users). */
export function testRoot(): string {
  return `~/.paseo-ssh-test-${rig().runId}`;
}

/** A root no other test uses, e.g. to observe a first install. */
export function uniqueTestRoot(label = "t"): string {
  return `${testRoot()}-${label}-${randomBytes(4).toString("hex")}`;
}

/** Runtime options (the JSON Paseo would send) for the rig host. */
export function rigOptions(extra: Record<string, unknown> = {}): Record<string, unknown> {
  const r = rig();
  return {
    host: r.host,
    port: r.port,
    user: r.user,
    identityFile: r.identityFile,
    knownHostsFile: r.knownHostsFile,
    root: testRoot(),
    connectTimeoutMs: 10_000,
    ...extra,
  };
}

/** Current size of the sshd log, to pass to sshdLogSince later. */
export function sshdLogOffset(): number {
  const log = rig().sshdLog;
  return log ? statSync(log).size : 0;
}

/** sshd log text written after `offset` (empty on an external host); lines end in "\n". */
export function sshdLogSince(offset: number): string {
  const log = rig().sshdLog;
  if (!log) return "";
  // sshd's -E log ends its lines with "\r\n".
  return readFileSync(log).subarray(offset).toString("utf8").replace(/\r\n/g, "\n");
}

/** Polls `cond` every 20 ms; rejects after `ms` so no test waits forever. */
export function waitFor(cond: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const tick = () => {
      if (cond()) return resolve();
      if (Date.now() > deadline) return reject(new Error(`condition not met within ${ms} ms`));
      setTimeout(tick, 20);
    };
    tick();
  });
}
