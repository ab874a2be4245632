// Authentication and connection failures against the real sshd: classes, exit codes and messages.
import { spawn, execFileSync } from "node:child_process";
import { copyFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { RuntimeError } from "../../src/shared/errors.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { connectSshHost } from "../../src/transport/ssh-host.js";
import { rig, rigOptions, waitFor } from "../rig/rig.js";
import { writeKeyFile } from "../rig/keys.js";
import { NEEDS, needs, skipUnless, unless } from "../support/needs.js";

const r = rig();
const s = suite();
const savedSock = process.env.SSH_AUTH_SOCK;
beforeEach(() => {
  delete process.env.SSH_AUTH_SOCK;
  s.push(() => {
    if (savedSock === undefined) delete process.env.SSH_AUTH_SOCK;
    else process.env.SSH_AUTH_SOCK = savedSock;
  });
});

async function failure(extra: Record<string, unknown>): Promise<RuntimeError> {
  const err = await connectSshHost(parseRuntimeOptions(rigOptions(extra))).then(
    (h) => {
      h.close();
      throw new Error("connection unexpectedly succeeded");
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RuntimeError);
  return err as RuntimeError;
}

describe("authentication", unless(r.encryptedIdentityFile === null ? `${NEEDS}a local rig host: the rig's encrypted key` : null), () => {
  it("an encrypted key without ssh-agent is an auth error that says to use ssh-agent", async () => {
    const err = await failure({ identityFile: r.encryptedIdentityFile });
    expect(err.errorClass).toBe("auth");
    expect(err.exitCode).toBe(3);
    expect(err.message).toContain(`SSH authentication failed for ${r.user}@${r.host}:${r.port}`);
    expect(err.message).toContain("is encrypted");
    expect(err.message).toContain("ssh-add");
  });

  it("a key the server does not accept is an auth error naming what was tried", async () => {
    const scratch = s.tmp(join(r.tmpDir, "auth-"));
    writeKeyFile(join(scratch, "stranger"));
    const err = await failure({ identityFile: join(scratch, "stranger") });
    expect(err.errorClass).toBe("auth");
    expect(err.message).toBe(
      `SSH authentication failed for ${r.user}@${r.host}:${r.port} (tried: publickey via ${join(scratch, "stranger")})`,
    );
  });

  it("a missing identity file is an auth error after the host key was verified", async () => {
    const steps: string[] = [];
    const missing = join(r.tmpDir, "no-such-key");
    const err = await connectSshHost(parseRuntimeOptions(rigOptions({ identityFile: missing })), { onStep: (s) => steps.push(s) }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RuntimeError);
    expect((err as RuntimeError).errorClass).toBe("auth");
    expect((err as RuntimeError).message).toContain(`cannot read identity file ${missing} (ENOENT)`);
    expect(steps).toEqual(["tcp", "host-key"]);
  });

  it("authenticates through ssh-agent when the identity file is encrypted", async (ctx) => {
    skipUnless(
      ctx,
      needs.command("ssh-agent", "OpenSSH's agent is not installed"),
      needs.command("ssh-keygen", "decrypts a copy of the key for ssh-add"),
      needs.command("ssh-add", "loads the agent"),
    );
    const scratch = s.tmp(join(r.tmpDir, "agent-"));
    const sock = join(scratch, "agent.sock");
    const agent = spawn("ssh-agent", ["-D", "-a", sock], { stdio: "ignore" });
    try {
      await waitFor(() => existsSync(sock), 5000);
      // ssh-add would prompt for the passphrase; load a decrypted copy of the same key instead.
      const plain = join(scratch, "decrypted");
      copyFileSync(r.encryptedIdentityFile!, plain);
      execFileSync("ssh-keygen", ["-q", "-p", "-P", r.encryptedPassphrase, "-N", "", "-f", plain]);
      execFileSync("ssh-add", ["-q", plain], { env: { ...process.env, SSH_AUTH_SOCK: sock }, stdio: "ignore" });
      process.env.SSH_AUTH_SOCK = sock;
      const steps: string[] = [];
      const h = await connectSshHost(parseRuntimeOptions(rigOptions({ identityFile: r.encryptedIdentityFile })), {
        onStep: (step, detail) => steps.push(`${step} ${detail}`),
      });
      try {
        expect(await h.call("ping", {})).toEqual({ pong: true });
      } finally {
        h.close();
      }
      expect(steps).toContain(`auth publickey via ssh-agent (${sock})`);
    } finally {
      agent.kill("SIGTERM");
    }
  });
});

describe("connection failures", () => {
  it("a closed port is a network error naming host:port", async () => {
    const err = await failure({ port: 1 });
    expect(err.errorClass).toBe("network");
    expect(err.exitCode).toBe(5);
    expect(err.message).toContain(`${r.host}:1`);
    expect(err.message).toContain("ECONNREFUSED");
  });

  it("an unresolvable host name is a network error", async () => {
    const err = await failure({ host: "paseo-ssh-test.invalid" });
    expect(err.errorClass).toBe("network");
    expect(err.message).toContain("paseo-ssh-test.invalid:");
  });

  it("a server that never speaks SSH times out within connectTimeoutMs", async () => {
    const { createServer } = await import("node:net");
    const silent = createServer(() => undefined);
    await new Promise<void>((res) => silent.listen(0, "127.0.0.1", () => res()));
    const port = (silent.address() as { port: number }).port;
    try {
      const started = Date.now();
      const err = await failure({ host: "127.0.0.1", port, connectTimeoutMs: 500 });
      expect(err.errorClass).toBe("network");
      expect(err.message).toContain(`127.0.0.1:${port}`);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      silent.close();
    }
  });
});
