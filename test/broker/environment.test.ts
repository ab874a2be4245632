// The detached broker outlives the operation that started it, so it must not carry Paseo's
// environment (which may hold secrets) for its whole life: only what ssh-agent auth and the
// runtime need reaches it. Checked on the real broker process through /proc/<pid>/environ.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import type { Options } from "../../src/contract/index.js";
import { lifecycleRequest, runCli } from "../support/run-cli.js";
import { brokerStats, stopBroker } from "../support/broker.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { rig, rigOptions, uniqueTestRoot } from "../rig/rig.js";
import { needs, unless } from "../support/needs.js";
import { nodeNetcat } from "../support/node-netcat.js";

const AGENT_SOCK = "/nonexistent/paseo-test-agent.sock";

/** The broker key includes SSH_AUTH_SOCK: address the broker an operation with AGENT_SOCK used. */
async function withAgentSock<T>(fn: () => Promise<T>): Promise<T> {
  const saved = process.env.SSH_AUTH_SOCK;
  process.env.SSH_AUTH_SOCK = AGENT_SOCK;
  try {
    return await fn();
  } finally {
    if (saved === undefined) delete process.env.SSH_AUTH_SOCK;
    else process.env.SSH_AUTH_SOCK = saved;
  }
}

const cleanups = suite();

describe("broker environment", unless(needs.linux("reads the broker's environment from /proc/<pid>/environ")), () => {
  it("a broker started by an operation whose env holds a secret never sees it; SSH_AUTH_SOCK is kept", async () => {
    const raw = rigOptions({ root: uniqueTestRoot("env"), brokerIdleMs: 3000 });
    const options = parseRuntimeOptions(raw);
    cleanups.push(() => withAgentSock(() => stopBroker(options)));
    const secret = `s3cret-${Math.random().toString(36).slice(2)}`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PASEO_TEST_API_TOKEN: secret,
      AWS_SECRET_ACCESS_KEY: secret,
      SSH_AUTH_SOCK: AGENT_SOCK,
    };
    const r = await runCli(["inspect", "--workspace-id", "env-probe"], {
      stdin: lifecycleRequest(raw as Options),
      env,
      timeoutMs: 60_000,
    });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const stats = await withAgentSock(() => brokerStats(options));
    expect(stats).not.toBeNull();
    const environ = readFileSync(`/proc/${stats!.pid}/environ`, "utf8").split("\0").filter(Boolean);
    expect(environ.some((kv) => kv.includes(secret))).toBe(false);
    expect(environ).toContain(`SSH_AUTH_SOCK=${AGENT_SOCK}`);
    const names = environ.map((kv) => kv.slice(0, kv.indexOf("=")));
    expect(names.filter((n) => !["PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"].includes(n))).toEqual([]);
  });

  it("a ProxyCommand still runs in the operation's environment, which the broker process itself never holds", async () => {
    const r = rig();
    const secret = `proxy-token-${Math.random().toString(36).slice(2)}`;
    const dir = mkdtempSync(join(tmpdir(), "paseo-proxy-env-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const config = join(dir, "ssh_config");
    writeFileSync(
      config,
      [
        "Host proxied",
        "  HostName 127.0.0.1",
        `  Port ${r.port}`,
        `  User ${r.user}`,
        `  IdentityFile ${r.identityFile}`,
        `  UserKnownHostsFile ${r.knownHostsFile}`,
        `  ProxyCommand sh -c 'test "$PASEO_PROXY_TOKEN" = ${secret} || { echo "proxy lacks its token" >&2; exit 5; }; exec ${nodeNetcat(dir)} %h %p'`,
        "",
      ].join("\n"),
    );
    const raw = { host: "proxied", sshConfig: config, root: uniqueTestRoot("proxyenv"), brokerIdleMs: 3000 };
    const options = parseRuntimeOptions(raw);
    cleanups.push(() => stopBroker(options));
    const res = await runCli(["inspect", "--workspace-id", "env-probe"], {
      stdin: lifecycleRequest(raw as unknown as Options),
      env: { ...process.env, PASEO_PROXY_TOKEN: secret },
      timeoutMs: 60_000,
    });
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    const stats = await brokerStats(options);
    expect(stats).not.toBeNull();
    expect(readFileSync(`/proc/${stats!.pid}/environ`).includes(secret)).toBe(false);
  });
});
