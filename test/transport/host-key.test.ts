// Strict host-key checking against the real sshd: accepted forms of known_hosts, and every refusal
// happening before authentication (proven from the sshd log).
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { RuntimeError } from "../../src/shared/errors.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { fingerprint } from "../../src/transport/known-hosts.js";
import { connectSshHost } from "../../src/transport/ssh-host.js";
import { needsOpenSsh } from "../rig/needs-openssh.js";
import { rig, rigOptions, sshdLogOffset, sshdLogSince } from "../rig/rig.js";
import { writeKeyFile } from "../rig/keys.js";
import { needs, unless } from "../support/needs.js";

const r = rig();
const hostName = r.port === 22 ? r.host : `[${r.host}]:${r.port}`;
const scratch = suite("all").tmp(join(r.tmpDir, "hk-"));
let fileCount = 0;

function knownHosts(lines: string[]): string {
  const file = join(scratch, `known_hosts.${++fileCount}`);
  writeFileSync(file, lines.join("\n") + "\n");
  return file;
}

/** `type base64` of the rig's host key of the given type. */
function hostKey(type: string): string {
  const line = r.hostPublicKeys.find((k) => k.startsWith(`${type} `));
  if (!line) throw new Error(`rig has no ${type} host key`);
  return line.split(" ").slice(0, 2).join(" ");
}

function freshKey(type = "ed25519"): string {
  const path = join(scratch, `other-${++fileCount}`);
  if (type !== "ed25519") throw new Error(`freshKey makes ed25519 keys, not ${type}`);
  return writeKeyFile(path);
}

function fp(key: string): string {
  return fingerprint(Buffer.from(key.split(" ")[1]!, "base64"));
}

async function connectOk(extra: Record<string, unknown>): Promise<void> {
  const h = await connectSshHost(parseRuntimeOptions(rigOptions(extra)));
  try {
    expect(await h.call("ping", {})).toEqual({ pong: true });
  } finally {
    h.close();
  }
}

/** Connects expecting a refusal; returns the error and the client's local port. */
async function connectRefused(extra: Record<string, unknown>): Promise<{ err: RuntimeError; localPort: number }> {
  let localPort = 0;
  const err = await connectSshHost(parseRuntimeOptions(rigOptions(extra)), { onSocket: (s) => (localPort = s.localPort ?? 0) }).then(
    (h) => {
      h.close();
      throw new Error("connection unexpectedly succeeded");
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RuntimeError);
  return { err: err as RuntimeError, localPort };
}

/** sshd's lines about one client port, once it has logged that connection's end. */
async function sshdLinesFor(offset: number, localPort: number): Promise<string[]> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const lines = sshdLogSince(offset)
      .split("\n")
      .filter((l) => l.includes(`port ${localPort} `) || l.endsWith(`port ${localPort}`) || l.includes(`port ${localPort}:`));
    if (lines.some((l) => /^(Disconnected from|Connection closed by)/.test(l)) || Date.now() > deadline) return lines;
    await new Promise((res) => setTimeout(res, 50));
  }
}

describe("host key verification", () => {
  it("accepts a plain known_hosts entry", async () => {
    await connectOk({ knownHostsFile: r.knownHostsFile });
  });

  it("accepts hashed known_hosts entries (ssh-keygen -H)", async () => {
    expect(readFileSync(r.hashedKnownHostsFile, "utf8")).toMatch(/^\|1\|/);
    await connectOk({ knownHostsFile: r.hashedKnownHostsFile });
  });

  it("accepts wildcard and comma-separated patterns, and prefers the key type it knows", async () => {
    const pattern = r.port === 22 ? "127.0.0.?" : `[127.0.0.?]:${r.port}`;
    await connectOk({ knownHostsFile: knownHosts([`nothere.example,${pattern} ${hostKey("ecdsa-sha2-nistp256")}`]) });
  });

  it("refuses a changed key before any authentication attempt", unless(needs.localHost("edits the rig's known_hosts")), async (ctx) => {
    needsOpenSsh(ctx, "reads sshd's log to prove no authentication was attempted");
    const offset = sshdLogOffset();
    const file = knownHosts([`${hostName} ${freshKey()}`]);
    const { err, localPort } = await connectRefused({ knownHostsFile: file });
    expect(err.errorClass).toBe("host-key");
    expect(err.exitCode).toBe(4);
    expect(err.message).toContain("CHANGED");
    expect(err.message).toContain(fp(hostKey("ssh-ed25519")));
    expect(err.message).toContain("ssh-ed25519");
    expect(err.message).toContain(file);
    expect(err.message).not.toContain("\n");

    const lines = await sshdLinesFor(offset, localPort);
    expect(lines.some((l) => l.startsWith(`Connection from 127.0.0.1 port ${localPort} `))).toBe(true);
    // "[preauth]": sshd saw this connection end before any user was authenticated.
    expect(
      lines.some((l) => /^(Disconnected from|Connection closed by) 127\.0\.0\.1 port \d+ \[preauth\]$/.test(l)),
      lines.join("\n"),
    ).toBe(true);
    expect(lines.filter((l) => /Accepted|Failed|Postponed|userauth|Invalid user|publickey/i.test(l))).toEqual([]);
  });

  it("refuses an unknown host and says how to add it after verifying", async () => {
    const file = knownHosts([`other.example ${freshKey()}`]);
    const { err } = await connectRefused({ knownHostsFile: file });
    expect(err.errorClass).toBe("host-key");
    expect(err.message).toMatch(/^Unknown host key for /);
    expect(err.message).toMatch(/SHA256:[A-Za-z0-9+/]{43}(?!=)/);
    expect(err.message).toContain(`ssh-keyscan -p ${r.port} ${r.host} >> ${file}`);
  });

  it("refuses when the known_hosts file does not exist", async () => {
    const file = join(scratch, "missing_known_hosts");
    const { err } = await connectRefused({ knownHostsFile: file });
    expect(err.errorClass).toBe("host-key");
    expect(err.message).toContain(`${file} does not exist`);
  });

  it("refuses a key marked @revoked even when it is also listed as valid", async () => {
    const key = hostKey("ssh-ed25519");
    const file = knownHosts([`${hostName} ${key}`, `@revoked * ${key}`]);
    const { err } = await connectRefused({ knownHostsFile: file });
    expect(err.errorClass).toBe("host-key");
    expect(err.message).toContain("REVOKED");
    expect(err.message).toContain(`${file} line 2`);
  });

  it("says @cert-authority is unsupported when it is the only match", async () => {
    const file = knownHosts([`@cert-authority ${hostName} ${freshKey()}`]);
    const { err } = await connectRefused({ knownHostsFile: file });
    expect(err.errorClass).toBe("host-key");
    expect(err.message).toContain("@cert-authority entries for it, which are not supported");
  });

  it("honours negated patterns", async () => {
    const file = knownHosts([`*,!${hostName} ${hostKey("ssh-ed25519")}`]);
    const { err } = await connectRefused({ knownHostsFile: file });
    expect(err.message).toMatch(/^Unknown host key/);
  });
});
