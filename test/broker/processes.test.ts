// The broker as Paseo meets it: every operation is a fresh `node dist/cli.js` process. Later
// processes reuse the first one's SSH connection (no new login in the sshd log), concurrent first
// processes start exactly one broker, and the broker's command line, socket and directory give
// nothing away to other users.
import { readFileSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import type { RuntimeOptions } from "../../src/transport/options.js";
import { lifecycleRequest, runCli } from "../support/run-cli.js";
import { needsOpenSsh } from "../rig/needs-openssh.js";
import { rig, rigOptions, sshdLogOffset, uniqueTestRoot } from "../rig/rig.js";
import { ownLogin, type OwnLogin } from "../support/own-login.js";
import { brokerStats, stopBroker, targetOf } from "../support/broker.js";
import { BROKER_NODE_FLAGS } from "../../src/broker/client/connect-broker.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";

const cleanups = suite();

/**
 * Raw options as Paseo sends them, plus the parsed form used to find the broker, logging in with a
 * key of the test's own so that its logins can be counted in sshd's log.
 */
function fresh(): { raw: Record<string, unknown>; parsed: RuntimeOptions; login: OwnLogin } {
  const login = ownLogin(cleanups);
  const raw = rigOptions({ root: uniqueTestRoot("broker-cli"), brokerIdleMs: 5000, identityFile: login.identityFile });
  const parsed = parseRuntimeOptions(raw);
  cleanups.push(() => stopBroker(parsed));
  return { raw, parsed, login };
}

/** `processes` asks the agent about a workspace that does not exist: one agent call, nothing else. */
function agentRoundTrip(raw: Record<string, unknown>, env?: NodeJS.ProcessEnv) {
  return runCli(["processes", "--workspace-id", "broker-nothing"], { stdin: lifecycleRequest(raw as never), env, timeoutMs: 60_000 });
}

describe("broker across runtime processes", () => {
  it("a second runtime process performs no SSH handshake", async (ctx) => {
    needsOpenSsh(ctx, "counts logins in sshd's log");
    const { raw, parsed, login } = fresh();
    const offset = sshdLogOffset();
    const first = await agentRoundTrip(raw);
    const afterFirst = login.loginsSince(offset);
    const second = await agentRoundTrip(raw);
    const third = await agentRoundTrip(raw);
    // Whatever the op answers for a missing workspace, it answered the same way every time.
    expect([second.code, third.code]).toEqual([first.code, first.code]);
    expect(first.stderr).not.toMatch(/broker/i);
    if (!rig().external) {
      expect(afterFirst).toBe(1);
      expect(login.loginsSince(offset)).toBe(1);
    }
    expect((await brokerStats(parsed))?.handshakes).toBe(1);
  });

  it("five processes starting at once share one broker and one login", async (ctx) => {
    needsOpenSsh(ctx, "counts logins in sshd's log");
    const { raw, parsed, login } = fresh();
    const offset = sshdLogOffset();
    const results = await Promise.all(Array.from({ length: 5 }, () => agentRoundTrip(raw)));
    expect(new Set(results.map((r) => r.code)).size).toBe(1);
    if (!rig().external) expect(login.loginsSince(offset)).toBe(1);
    expect((await brokerStats(parsed))?.handshakes).toBe(1);
  });

  it("with PASEO_SSH_NO_BROKER=1 every process logs in itself", async (ctx) => {
    needsOpenSsh(ctx, "counts logins in sshd's log");
    const { raw, login } = fresh();
    const offset = sshdLogOffset();
    const env = { ...process.env, PASEO_SSH_NO_BROKER: "1" };
    await agentRoundTrip(raw, env);
    await agentRoundTrip(raw, env);
    if (!rig().external) expect(login.loginsSince(offset)).toBe(2);
  });

  it("keeps its socket 0600 in a 0700 directory and its argv free of workspace ids and options", async () => {
    const { raw, parsed } = fresh();
    await agentRoundTrip(raw);
    const stats = await brokerStats(parsed);
    const { socket } = (await targetOf(parsed)).paths;
    expect(statSync(socket).mode & 0o777).toBe(0o600);
    expect(statSync(dirname(socket)).mode & 0o777).toBe(0o700);
    if (process.platform === "linux") {
      // The broker renames itself (process.title); before that its argv is `node <V8 flags> …/broker.js`.
      const cmdline = readFileSync(`/proc/${stats!.pid}/cmdline`, "utf8").replace(/\0+/g, " ").trim();
      expect(cmdline).toMatch(new RegExp(`^paseo-ssh-broker$|^\\S+ ${BROKER_NODE_FLAGS.join(" ")} \\S+broker\\.js$`));
      expect(cmdline).not.toContain("broker-nothing");
      expect(cmdline).not.toContain(String(raw.root));
    }
  });
});
