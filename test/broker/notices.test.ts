// The notices stream against the real sshd rig: what the host daemon publishes (here through the
// test hooks file, as kind "test") reaches the broker with no operation asking for it, changes and
// removals too; after a link reset the broker reconnects by itself and the daemon's snapshot
// brings it up to date (a key removed during the outage is gone, one added is there); the stream
// keeps the broker up while it holds notices, and keeps neither it nor the daemon up otherwise.
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { openHost } from "../../src/broker/client/open-host.js";
import type { RuntimeOptions } from "../../src/transport/options.js";
import { suiteRoot } from "../support/workspace.js";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { alive, brokerNotices, brokerOptions, brokerStats, stopBroker, targetOf } from "../support/broker.js";
import { waitFor } from "../rig/rig.js";
import { throughProxy } from "../support/host-daemon.js";
import { setDaemonTestNotices } from "../support/test-hooks.js";
import { needs, unless } from "../support/needs.js";

const cleanups = suite();

/** Polls `probe` until `ok` holds of its value (bounded); the last value is returned either way for the assertion. */
async function until<T>(probe: () => Promise<T>, ok: (v: T) => boolean, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function ping(options: RuntimeOptions): Promise<void> {
  const host = await openHost(options);
  try {
    await host.call("ping", {}, 20_000);
  } finally {
    host.close();
  }
}

const same = (want: unknown) => (v: unknown) => JSON.stringify(v) === JSON.stringify(want);

describe("notices from the host daemon", unless(needs.localHost("writes the daemon's test hooks file on the host")), () => {
  it("a published notice reaches the broker unasked (change, removal), and after a link reset the snapshot brings it up to date", async () => {
    const { proxy, options: through } = await throughProxy(cleanups, { keepaliveIntervalMs: 1000 });
    const options = brokerOptions({ ...through, root: suiteRoot("notices"), brokerIdleMs: 2000 });
    cleanups.push(() => stopBroker(options, { retireDaemon: true }));
    const root = options.root;
    await ping(options);

    setDaemonTestNotices(root, { a: { n: 1 } });
    expect(await until(() => brokerNotices(options, "test"), same([{ n: 1, kind: "test", key: "a" }]), 10_000)).toEqual([
      { n: 1, kind: "test", key: "a" },
    ]);
    setDaemonTestNotices(root, { a: { n: 2 }, b: { n: 3 } });
    const both = [
      { n: 2, kind: "test", key: "a" },
      { n: 3, kind: "test", key: "b" },
    ];
    expect(await until(() => brokerNotices(options, "test"), same(both), 10_000)).toEqual(both);
    expect(await brokerNotices(options, "test", "b")).toEqual([{ n: 3, kind: "test", key: "b" }]);
    const before = await brokerStats(options);
    expect(before?.noticesUp).toBe(true);
    expect(before?.notices).toBe(2);

    // Held notices keep an idle broker up (brokerIdleMs 2000).
    await new Promise((r) => setTimeout(r, 4000));
    expect((await brokerStats(options))?.pid).toBe(before?.pid);

    // The link is reset; meanwhile a is withdrawn and c appears. No operation follows.
    proxy.cutAll({ reset: true });
    setDaemonTestNotices(root, { b: { n: 3 }, c: { n: 4 } });
    const after = [
      { n: 3, kind: "test", key: "b" },
      { n: 4, kind: "test", key: "c" },
    ];
    expect(await until(() => brokerNotices(options, "test"), same(after), 20_000)).toEqual(after);
    const stats = await brokerStats(options);
    expect(stats?.handshakes).toBeGreaterThanOrEqual(2);
    expect(stats?.pid).toBe(before?.pid);

    // Nothing held: the broker idles out although its notices stream is open.
    setDaemonTestNotices(root, {});
    expect(await until(() => brokerNotices(options, "test"), same([]), 10_000)).toEqual([]);
    // Watched by its pid, not asked: every question to the broker is activity. Same 6 s bound as
    // the fixed wait this was, ended as soon as the broker is gone (brokerIdleMs 2000).
    await waitFor(() => !alive(stats!.pid), 6000);
    expect(await brokerStats(options)).toBeNull();
  });

  it("a host that sends what the protocol does not declare: an unknown kind is never held, a malformed ports report takes the key's forward away", async () => {
    const options = brokerOptions({ root: suiteRoot("notices-hostile"), brokerIdleMs: 60_000 });
    cleanups.push(() => stopBroker(options, { retireDaemon: true }));
    const root = options.root;
    await ping(options);
    const log = async () => readFileSync((await targetOf(options)).paths.log, "utf8");

    // A well-formed ports report: the broker forwards the port here.
    const hostPort = 20_000 + Math.floor(Math.random() * 20_000);
    setDaemonTestNotices(root, { w1: { ports: [{ port: hostPort, pid: 1, argv0: "srv", since: 0 }] } }, "ports");
    const held = await until(
      () => brokerNotices(options, "ports"),
      (v) => (v?.[0]?.forwards as unknown[] | undefined)?.length === 1,
      10_000,
    );
    const local = (held?.[0]?.forwards as Array<{ localPort: number }>)[0]!.localPort;
    const answers = (port: number) =>
      new Promise<boolean>((resolve) => {
        const c = connect(port, "127.0.0.1");
        c.once("connect", () => (c.destroy(), resolve(true)));
        c.once("error", () => resolve(false));
      });
    expect(await answers(local)).toBe(true);

    // The same key reported unreadably: nothing is held for it and its local port no longer listens.
    setDaemonTestNotices(root, { w1: { ports: [{ port: "not a number" }] } }, "ports");
    expect(
      await until(
        () => brokerNotices(options, "ports"),
        (v) => v?.length === 0,
        10_000,
      ),
    ).toEqual([]);
    expect(
      await until(
        () => answers(local),
        (up) => !up,
        5000,
      ),
    ).toBe(false);
    expect(await log()).toContain('notices stream: ignored a malformed ports notice for "w1"');

    // A kind this build does not declare: arrives (the broker says so) and is never held.
    setDaemonTestNotices(root, { x: { a: 1 } }, "not-a-kind");
    const unknown = 'notices stream: ignored a notice of unknown kind "not-a-kind"';
    expect(await until(log, (text) => text.includes(unknown), 10_000)).toContain(unknown);
    expect(await brokerNotices(options, "not-a-kind")).toEqual([]);
    expect((await brokerStats(options))?.notices).toBe(0);
  });

  it("the notices stream is not work: the host daemon idles out while the broker holds it open", async () => {
    const options = brokerOptions({ root: suiteRoot("notices-idle"), daemonIdleMs: 1000, brokerIdleMs: 60_000 });
    cleanups.push(() => stopBroker(options, { retireDaemon: true }));
    await ping(options);
    expect(
      await until(
        () => brokerStats(options),
        (s) => s?.noticesUp === true,
        10_000,
      ),
    ).toMatchObject({ noticesUp: true });
    // The daemon leaves after ~1 s idle and a 2 s drain; the broker's channel (and stream) go with it.
    const s = await until(
      () => brokerStats(options),
      (v) => v?.noticesUp === false,
      15_000,
    );
    expect(s?.noticesUp).toBe(false);
    expect(s?.muxChannels).toBe(0);
  });
});
