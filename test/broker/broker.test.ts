// The per-host broker against the real sshd rig: later clients reuse its connection (no new
// handshake in the sshd log), conversations are streams of one daemon channel whatever their
// number, broken or stale brokers are replaced rather than trusted, a dropped link is
// re-established, and an idle broker exits.
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { startDelayProxy, type DelayProxy } from "../../bench/delay-proxy.mjs";
import { parseRuntimeOptions, type RuntimeOptions } from "../../src/transport/options.js";
import { BrokerHost } from "../../src/broker/client/broker-host.js";
import { openHost } from "../../src/broker/client/open-host.js";
import { SshHost } from "../../src/transport/ssh-host.js";
import type { AgentChannel } from "../../src/transport/agent-channel.js";
import { needsOpenSsh } from "../rig/needs-openssh.js";
import { rig, sshdLogOffset, uniqueTestRoot, waitFor } from "../rig/rig.js";
import { alive, brokerOptions, brokerStats, stopBroker, targetOf } from "../support/broker.js";
import { ownLogin } from "../support/own-login.js";
import { extraSshdSkipReason, startExtraSshd } from "../support/extra-sshd.js";

const cleanups = suite();

function track(options: RuntimeOptions): RuntimeOptions {
  cleanups.push(() => stopBroker(options));
  return options;
}

async function ping(options: RuntimeOptions): Promise<unknown> {
  const host = await openHost(options);
  try {
    return await host.call("ping", {}, 20_000);
  } finally {
    host.close();
  }
}

describe("broker", () => {
  it("serves later clients over the first client's SSH connection", async (ctx) => {
    needsOpenSsh(ctx, "counts logins in sshd's log");
    const login = ownLogin(cleanups);
    const options = track(brokerOptions({ identityFile: login.identityFile }));
    const offset = sshdLogOffset();
    const first = await openHost(options);
    expect(first).toBeInstanceOf(BrokerHost);
    expect(await first.call("ping", {})).toEqual({ pong: true });
    first.close();
    const afterFirst = login.loginsSince(offset);
    if (!rig().external) expect(afterFirst).toBe(1);
    for (let i = 0; i < 3; i++) expect(await ping(options)).toEqual({ pong: true });
    if (!rig().external) expect(login.loginsSince(offset)).toBe(1);
    const stats = await brokerStats(options);
    expect(stats?.handshakes).toBe(1);
    expect(stats?.connections).toBe(1);
  });

  it("carries 25 held conversations and 50 concurrent calls as streams of one daemon channel on one connection", async () => {
    const options = track(brokerOptions());
    const host = await openHost(options);
    cleanups.push(() => host.close());
    const held: AgentChannel[] = await Promise.all(Array.from({ length: 25 }, () => host.openAgent()));
    const during = await brokerStats(options);
    expect(during?.liveChannels).toBe(25);
    // sshd's default MaxSessions is 10: the conversations are not session channels.
    expect(during?.connections).toBe(1);
    expect(during?.muxChannels).toBe(1);
    // The embedded ssh2 server forwards no Unix sockets: there, a relay session carries the channel.
    const relay = rig().server === "embedded";
    // The session channel that started the host daemon (daemon-up) may still be closing on a slow
    // host (seen on the compose container with two workers): wait for it, bounded, then judge.
    let settled = during;
    for (let i = 0; i < 50 && settled?.sessionChannels !== (relay ? 1 : 0); i++) {
      await new Promise((r) => setTimeout(r, 200));
      settled = await brokerStats(options);
    }
    expect(settled?.sessionChannels).toBe(relay ? 1 : 0);
    expect(during?.daemonTransport).toBe(relay ? "relay" : "stream-local");
    for (const ch of held) ch.end();
    const results = await Promise.all(Array.from({ length: 50 }, () => host.call("ping", {}, 60_000)));
    expect(results).toEqual(Array.from({ length: 50 }, () => ({ pong: true })));
    expect((await brokerStats(options))?.handshakes).toBe(1);
  });

  it("replaces a broker killed with SIGKILL whose socket file is left behind", async () => {
    const options = track(brokerOptions());
    await ping(options);
    const before = await brokerStats(options);
    expect(before).not.toBeNull();
    process.kill(before!.pid, "SIGKILL");
    await waitFor(() => !alive(before!.pid), 5000);
    expect(existsSync((await targetOf(options)).paths.socket)).toBe(true);
    expect(await ping(options)).toEqual({ pong: true });
    const after = await brokerStats(options);
    expect(after?.pid).not.toBe(before!.pid);
    expect(alive(after!.pid)).toBe(true);
  });

  it("does not trust a listener that answers with another version, and replaces it", async () => {
    const options = track(brokerOptions());
    const { socket } = (await targetOf(options)).paths;
    // It reads what it is sent (a client's request may come with the connect) and answers with
    // another build's hello.
    const impostor = createServer((s) => s.resume().end('{"v":"0-old","pid":1}\n'));
    await new Promise<void>((resolve) => impostor.listen(socket, resolve));
    chmodSync(socket, 0o600);
    cleanups.push(() => new Promise<void>((r) => impostor.close(() => r())));
    expect(await ping(options)).toEqual({ pong: true });
    const stats = await brokerStats(options);
    expect(stats?.pid).not.toBe(1);
    expect(alive(stats!.pid)).toBe(true);
  });

  it("sends the first agent request with the connect, before the broker's hello", async () => {
    const options = track(brokerOptions());
    const target = await targetOf(options);
    let received = "";
    let helloSent = false;
    let requestBeforeHello: boolean | null = null;
    // A broker of our version that says hello once it has a request, or after 5 s if none came.
    const listener = createServer((s) => {
      const hello = () => {
        if (helloSent) return;
        helloSent = true;
        s.write(`${JSON.stringify({ v: target.version, pid: process.pid })}\n`);
      };
      const late = setTimeout(hello, 5000);
      s.on("data", (d: Buffer) => {
        received += d.toString();
        requestBeforeHello ??= !helloSent;
        clearTimeout(late);
        hello();
      });
      s.on("close", () => clearTimeout(late));
      s.on("error", () => undefined);
    });
    await new Promise<void>((resolve) => listener.listen(target.paths.socket, resolve));
    chmodSync(target.paths.socket, 0o600);
    cleanups.push(() => new Promise<void>((r) => listener.close(() => r())));
    const host = await openHost(options);
    try {
      await waitFor(() => received.includes("\n"), 10_000);
      expect(received).toBe('{"kind":"agent"}\n');
      expect(requestBeforeHello).toBe(true);
    } finally {
      host.close();
    }
  });

  it("does not use a socket others could open: it is removed and a new broker started", async () => {
    const options = track(brokerOptions());
    await ping(options);
    const first = await brokerStats(options);
    const { socket } = (await targetOf(options)).paths;
    chmodSync(socket, 0o666);
    expect(await ping(options)).toEqual({ pong: true });
    const second = await brokerStats(options);
    expect(second?.pid).not.toBe(first!.pid);
    // The replaced broker notices its socket is gone and exits once it is idle, leaving the new
    // broker's socket in place (closing a Node server unlinks its path, whoever's it is now).
    await waitFor(() => !alive(first!.pid), 10_000);
    expect(existsSync(socket)).toBe(true);
    expect((await brokerStats(options))?.pid).toBe(second!.pid);
  });

  it("reconnects after every connection through a proxy is cut", async () => {
    const r = rig();
    const proxy: DelayProxy = await startDelayProxy({ targetPort: r.port, delayMs: 5 });
    cleanups.push(() => proxy.close());
    const dir = mkdtempSync(join(tmpdir(), "paseo-broker-kh-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const knownHostsFile = join(dir, "known_hosts");
    writeFileSync(
      knownHostsFile,
      r.hostPublicKeys.map((k) => `[127.0.0.1]:${proxy.port} ${k.split(" ").slice(0, 2).join(" ")}\n`).join(""),
    );
    const options = track(brokerOptions({ host: "127.0.0.1", port: proxy.port, knownHostsFile }));
    expect(await ping(options)).toEqual({ pong: true });
    expect((await brokerStats(options))?.handshakes).toBe(1);
    proxy.cutAll();
    expect(await ping(options)).toEqual({ pong: true });
    const stats = await brokerStats(options);
    expect(stats?.handshakes).toBe(2);
    expect(stats?.connections).toBe(1);
  });

  it("fails an operation clearly, within the reconnect window, when the link stays down", async () => {
    const r = rig();
    const proxy: DelayProxy = await startDelayProxy({ targetPort: r.port, delayMs: 0 });
    const dir = mkdtempSync(join(tmpdir(), "paseo-broker-kh-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const knownHostsFile = join(dir, "known_hosts");
    writeFileSync(
      knownHostsFile,
      r.hostPublicKeys.map((k) => `[127.0.0.1]:${proxy.port} ${k.split(" ").slice(0, 2).join(" ")}\n`).join(""),
    );
    // connectTimeoutMs 1000 gives a 5 s reconnect window.
    const options = track(brokerOptions({ host: "127.0.0.1", port: proxy.port, knownHostsFile, connectTimeoutMs: 1000 }));
    expect(await ping(options)).toEqual({ pong: true });
    await proxy.close();
    const started = Date.now();
    const err = await ping(options).then(
      () => null,
      (e: unknown) => e,
    );
    const took = Date.now() - started;
    expect(err).toBeInstanceOf(Error);
    expect((err as { errorClass?: string }).errorClass).toBe("network");
    expect((err as Error).message).toMatch(new RegExp(`127\\.0\\.0\\.1:${proxy.port}`));
    expect(took).toBeLessThan(15_000);
  });

  it("exits after brokerIdleMs without clients and removes its socket", async () => {
    const options = track(brokerOptions({ brokerIdleMs: 1000 }));
    await ping(options);
    const stats = await brokerStats(options);
    await waitFor(() => !alive(stats!.pid), 10_000);
    expect(existsSync((await targetOf(options)).paths.socket)).toBe(false);
  });

  it("a hand-off run of a stopped broker (noStart) fails clearly and starts no broker of its own", async () => {
    // A `work-notice` run still going when its broker is stopped must not bring the broker (and
    // with it a host daemon) back after the stop.
    const options = track(brokerOptions());
    await ping(options);
    const target = await targetOf(options);
    const { pid } = (await brokerStats(options))!;
    await stopBroker(options);
    await waitFor(() => !alive(pid), 10_000);
    await expect(new BrokerHost(options, target, { noStart: true }).connect()).rejects.toMatchObject({
      errorClass: "network",
      message: expect.stringMatching(/that started this operation is gone/),
    });
    await new Promise((r) => setTimeout(r, 500));
    expect(existsSync(target.paths.socket)).toBe(false);
    expect(await brokerStats(options)).toBeNull();
    // Without noStart, the same connect starts one (what every other operation wants).
    const host = await new BrokerHost(options, target).connect();
    host.close();
    expect(await brokerStats(options)).not.toBeNull();
  });

  it("does not idle out while a channel is live, however long it lasts", async () => {
    const options = track(brokerOptions({ brokerIdleMs: 1000 }));
    const host = await openHost(options);
    cleanups.push(() => host.close());
    const held = await host.openAgent();
    const { pid } = (await brokerStats(options))!;
    await new Promise((r) => setTimeout(r, 3000));
    expect(alive(pid)).toBe(true);
    // The held channel still carries a conversation after three idle periods.
    expect(await held.request({ op: "ping", root: options.root })).toEqual({ pong: true });
    held.end();
    await waitFor(() => !alive(pid), 10_000);
  });

  it("speaks chacha20-poly1305 to a server offering only that, with ssh2's WebAssembly Poly1305 skipped when its binding is there", async (ctx) => {
    const skip = extraSshdSkipReason();
    if (skip) return ctx.skip(skip);
    const sshd = await startExtraSshd(["Ciphers chacha20-poly1305@openssh.com"]);
    cleanups.push(() => sshd.stop());
    const options = track(parseRuntimeOptions(sshd.options({ root: uniqueTestRoot("broker"), brokerIdleMs: 3000 })));
    expect(await ping(options)).toEqual({ pong: true });
    let binding = true;
    try {
      createRequire(import.meta.url)("ssh2/lib/protocol/crypto/build/Release/sshcrypto.node");
    } catch {
      binding = false;
    }
    const log = readFileSync((await targetOf(options)).paths.log, "utf8");
    expect(log).toContain(
      binding ? "WebAssembly Poly1305 skipped (its native binding is loaded)" : "WebAssembly Poly1305 loaded (no native binding)",
    );
  });

  it("connects in-process with broker: false or PASEO_SSH_NO_BROKER=1", async () => {
    const options = brokerOptions({ broker: false });
    const host = await openHost(options);
    try {
      expect(host).toBeInstanceOf(SshHost);
      expect(await host.call("ping", {})).toEqual({ pong: true });
    } finally {
      host.close();
    }
    process.env.PASEO_SSH_NO_BROKER = "1";
    try {
      const direct = await openHost(brokerOptions());
      expect(direct).toBeInstanceOf(SshHost);
      direct.close();
    } finally {
      delete process.env.PASEO_SSH_NO_BROKER;
    }
  });
});
