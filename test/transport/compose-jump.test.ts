// Under `npm run test:compose` (Docker): the compose target reached through the compose bastion
// as a ProxyJump host, by the alias in the ssh_config the runner writes. Skipped elsewhere; the
// local equivalent with network namespaces is jump.test.ts.
import { describe, expect, it } from "vitest";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { connectSshHost } from "../../src/transport/ssh-host.js";
import { testRoot } from "../rig/rig.js";
import { runCli } from "../support/run-cli.js";
import { NEEDS, unless } from "../support/needs.js";

const sshConfig = process.env.PASEO_TEST_JUMP_SSH_CONFIG;
const host = process.env.PASEO_TEST_JUMP_HOST;

const composeRig = unless(
  sshConfig !== undefined && host !== undefined
    ? null
    : `${NEEDS}the compose rig: npm run test:compose sets PASEO_TEST_JUMP_SSH_CONFIG and PASEO_TEST_JUMP_HOST`,
);

describe("compose: the target through the bastion", composeRig, () => {
  it("doctor passes every step of both hops", async () => {
    const r = await runCli(["doctor", "--options", JSON.stringify({ host, sshConfig, root: testRoot() })], { timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.toString()).toContain("hop 2/2 paseo-compose-target (sshd)");
  });

  it("an agent call through the bastion reaches the target", async () => {
    const h = await connectSshHost(parseRuntimeOptions({ host, sshConfig, root: testRoot(), broker: false }));
    try {
      expect((await h.call("facts", {})).os).toMatch(/^linux/);
    } finally {
      h.close();
    }
  });
});
