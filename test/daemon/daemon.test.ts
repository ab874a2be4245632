// The host daemon against real OpenSSH servers: 100 live execs over one SSH connection to an sshd
// with MaxSessions 10 (exact results, at most 3 runtime processes on the host and their RSS
// bounded), the relay when sshd refuses stream-local forwarding, a newer build retiring an older
// daemon once its execs ended, idle exit, a daemon stopped with SIGTERM (its execs reaped at once)
// and one killed with SIGKILL (the wrapper names the cause; the next daemon's start-up sweep reaps
// the orphaned workload). Every test ends with no
// runtime process left on the host.
import { copyFileSync, existsSync, appendFileSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { longSuite } from "../support/needs.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { agentBundle } from "../../src/transport/bootstrap.js";
import { connectSsh } from "../../src/transport/ssh-connection.js";
import { SshHost } from "../../src/transport/ssh-host.js";
import { execRecordPath, readRecordFile } from "../../src/remote-agent/exec/records.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { brokerStats, stopBroker } from "../support/broker.js";
import { ExecWorkspace, exitOf, type ExecHandle } from "../support/exec.js";
import { rig, waitFor } from "../rig/rig.js";
import { extraSshdSkipReason, startExtraSshd, type ExtraSshd } from "../support/extra-sshd.js";
import { runCli, lifecycleRequest } from "../support/run-cli.js";
import { daemonsOf, finish, runtimeProcesses, throughProxy as throughProxyFor, type HostProc } from "../support/host-daemon.js";
import { onHost, requireView } from "../support/host-view.js";

/** Whether a host pid (a daemon's) is still running. */
const aliveOnHost = (pid: number) => !requireView().isGone(pid);

const cleanups = suite();

const PATH = { PATH: "/usr/bin:/bin" };

/** A proxy in front of the rig's sshd (see test/support/host-daemon.ts). */
const throughProxy = (extra: Record<string, unknown> = {}) => throughProxyFor(cleanups, extra);

/** Starts `n` execs that stay live; resolves once each printed `ready`, with its workload's identity. */
async function liveExecs(ws: ExecWorkspace, n: number, tag: string) {
  const layout = workspaceLayout(ws.configuredRoot, ws.workspaceId);
  const handles = Array.from({ length: n }, () => ws.start({ argv: ["/bin/sh", "-c", `echo ready; exec sleep ${tag}`], env: PATH }));
  await Promise.all(handles.map((h) => h.waitOutput("ready\n")));
  return handles.map((h) => {
    const rec = readRecordFile(onHost(execRecordPath(layout, h.execId)))!;
    return { h, pid: rec.pid!, startTime: rec.startTime!, record: () => readRecordFile(onHost(execRecordPath(layout, h.execId))) };
  });
}
const skip = extraSshdSkipReason();

describe("host daemon", () => {
  it(
    "100 live pipes execs through an sshd with MaxSessions 10: one SSH connection, exact results, at most 3 runtime processes within 150 MiB",
    { ...longSuite("100 execs at once"), timeout: 600_000 },
    async (ctx) => {
      if (skip) return ctx.skip(skip);
      const sshd: ExtraSshd = await startExtraSshd(["MaxSessions 10"]);
      cleanups.push(() => sshd.stop());
      const ws = new ExecWorkspace("daemon-100", sshd.options());
      cleanups.push(() => finish(ws));
      await ws.create();
      const N = 100;
      const handles: ExecHandle[] = [];
      for (let i = 0; i < N; i++) {
        handles.push(
          ws.start(
            { argv: ["/bin/sh", "-c", `echo start-${i}; read line; echo "got-$line"; exit ${i % 50}`], env: PATH },
            { keepStdinOpen: true },
          ),
        );
      }
      await Promise.all(handles.map((h, i) => h.waitOutput(`start-${i}\n`, 240_000)));
      // All 100 are live now (each waits for its stdin line): measure the host side.
      let peakCount = 0;
      let peakRssKiB = 0;
      let procs: HostProc[] = [];
      for (let sample = 0; sample < 5; sample++) {
        procs = runtimeProcesses(ws.configuredRoot);
        peakCount = Math.max(peakCount, procs.length);
        peakRssKiB = Math.max(
          peakRssKiB,
          procs.reduce((n, p) => n + p.rssKiB, 0),
        );
        await new Promise((r) => setTimeout(r, 200));
      }
      console.log(
        `100 live execs: ${peakCount} runtime process(es) on the host, ${(peakRssKiB / 1024).toFixed(1)} MiB RSS in total: ${procs.map((p) => `${p.args.replace(/^.*agent\.cjs /, "")} ${(p.rssKiB / 1024).toFixed(1)} MiB`).join("; ")}`,
      );
      expect(daemonsOf(ws.configuredRoot).length).toBe(1);
      expect(peakCount).toBeLessThanOrEqual(3);
      expect(peakRssKiB).toBeLessThanOrEqual(150 * 1024);
      const stats = await brokerStats(parseRuntimeOptions(ws.options));
      expect(stats).toMatchObject({ connections: 1, handshakes: 1, muxChannels: 1, liveChannels: N, daemonTransport: "stream-local" });
      expect(sshd.logins()).toBe(1);

      handles.forEach((h, i) => h.stdin.end(`line-${i}\n`));
      const results = await Promise.all(handles.map((h) => h.done));
      results.forEach((r, i) => {
        expect(exitOf(r)).toEqual({ code: i % 50, signal: null });
        expect(r.stdout.toString()).toBe(`start-${i}\ngot-line-${i}\n`);
        expect(r.stderr).toBe("");
      });
      expect(sshd.logins()).toBe(1);
    },
  );

  it.for(["AllowStreamLocalForwarding no", "DisableForwarding yes"])(
    "relays through `agent.cjs relay` when sshd refuses stream-local forwarding (%s), brokered and in-process",
    { timeout: 120_000 },
    async (line, ctx) => {
      if (skip) return ctx.skip(skip);
      const sshd = await startExtraSshd([line]);
      cleanups.push(() => sshd.stop());
      const ws = new ExecWorkspace("daemon-relay", sshd.options());
      cleanups.push(() => finish(ws));
      await ws.create();
      const r = await ws.run({ argv: ["/bin/cat"] }, { stdin: "through the relay\n" });
      expect(exitOf(r)).toEqual({ code: 0, signal: null });
      expect(r.stdout.toString()).toBe("through the relay\n");
      const stats = await brokerStats(parseRuntimeOptions(ws.options));
      expect(stats).toMatchObject({ daemonTransport: "relay", muxChannels: 1, sessionChannels: 1, connections: 1 });
      const kinds = () =>
        runtimeProcesses(ws.configuredRoot)
          .map((p) => /agent\.cjs (\S+)/.exec(p.args)?.[1])
          .sort();
      // A starter that lost the race to bind the socket (two channels' relays at once) runs a
      // daemon that exits 0 as soon as its bind fails: under load it can still be listed here.
      await waitFor(() => JSON.stringify(kinds()) === JSON.stringify(["daemon", "relay"]), 10_000).catch(() => undefined);
      expect(kinds()).toEqual(["daemon", "relay"]);
      // In-process (broker: false) takes the same way.
      const options = parseRuntimeOptions(ws.options);
      const host = new SshHost(await connectSsh(options), options);
      try {
        expect(await host.call("ping", {})).toEqual({ pong: true });
        expect(host.link.transport).toBe("relay");
      } finally {
        host.close();
      }
    },
  );

  it("a newer build's daemon retires the older one, which exits once its live exec has ended", async () => {
    const ws = new ExecWorkspace("daemon-retire");
    cleanups.push(() => finish(ws));
    await ws.create();
    const h = ws.start({ argv: ["/bin/sh", "-c", "echo ready; read x; echo done-$x"], env: PATH }, { keepStdinOpen: true });
    await h.waitOutput("ready\n");
    const layout = workspaceLayout(ws.configuredRoot, ws.workspaceId);
    const older = readRecordFile(onHost(execRecordPath(layout, h.execId)))!.agentPid;
    expect(aliveOnHost(older)).toBe(true);

    // Another build: the same agent with one more byte, so another content hash.
    const dir = mkdtempSync(join(tmpdir(), "paseo-other-build-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "remote-agent.cjs");
    copyFileSync(agentBundle().path, path);
    appendFileSync(path, "\n");
    const newer = agentBundle(path);
    expect(newer.hash).not.toBe(agentBundle().hash);
    const options = parseRuntimeOptions(ws.options);
    const host = new SshHost(await connectSsh(options), options, newer);
    try {
      expect(await host.call("ping", {})).toEqual({ pong: true });
      const newerPid = host.link.daemonPid!;
      expect(newerPid).not.toBe(older);
      expect(
        daemonsOf(ws.configuredRoot)
          .map((p) => p.pid)
          .sort(),
      ).toEqual([older, newerPid].sort());
      // Retired, the older daemon still serves its exec to the end.
      await new Promise((r) => setTimeout(r, 1500));
      expect(aliveOnHost(older)).toBe(true);
      h.stdin.end("now\n");
      const r = await h.done;
      expect(exitOf(r)).toEqual({ code: 0, signal: null });
      expect(r.stdout.toString()).toBe("ready\ndone-now\n");
      await waitFor(() => !aliveOnHost(older), 10_000);
      expect(existsSync(onHost(join(ws.configuredRoot, "run", `d-${agentBundle().hash}.sock`)))).toBe(false);
      expect(existsSync(onHost(join(ws.configuredRoot, "run", `d-${newer.hash}.sock`)))).toBe(true);
      expect(aliveOnHost(newerPid)).toBe(true);
    } finally {
      host.close();
    }
  }, 120_000);

  it("exits after daemonIdleMs with nothing live, never while an exec is live", async () => {
    const ws = new ExecWorkspace("daemon-idle", { daemonIdleMs: 1000 });
    cleanups.push(() => finish(ws));
    await ws.create();
    const h = ws.start({ argv: ["/bin/sh", "-c", "echo ready; read x"], env: PATH }, { keepStdinOpen: true });
    await h.waitOutput("ready\n");
    const [daemon] = daemonsOf(ws.configuredRoot);
    expect(daemon).toBeDefined();
    await new Promise((r) => setTimeout(r, 3000));
    expect(aliveOnHost(daemon!.pid)).toBe(true);
    h.stdin.end("x\n");
    expect(exitOf(await h.done)).toEqual({ code: 0, signal: null });
    await waitFor(() => !aliveOnHost(daemon!.pid), 10_000);
    expect(existsSync(onHost(join(ws.configuredRoot, "run", `d-${agentBundle().hash}.sock`)))).toBe(false);
    // The next operation starts a new one.
    const r = await ws.run({ argv: ["/bin/echo", "again"] });
    expect(r.stdout.toString()).toBe("again\n");
  }, 120_000);

  it("an idle daemon says GOAWAY before exiting; an operation arriving meanwhile is served by it and keeps it", async () => {
    const ws = new ExecWorkspace("daemon-goaway", { daemonIdleMs: 1000 });
    cleanups.push(() => finish(ws));
    const options = parseRuntimeOptions(ws.options);
    const host = new SshHost(await connectSsh(options), options);
    try {
      expect(await host.call("ping", {})).toEqual({ pong: true });
      const pid = host.link.daemonPid!;
      // Idle: the daemon tells the channel to open nothing more, then waits before exiting.
      await waitFor(() => !host.link.connected, 10_000);
      expect(await host.call("ping", {})).toEqual({ pong: true });
      expect(host.link.daemonPid).toBe(pid);
      const log = () => readFileSync(onHost(join(ws.configuredRoot, "run", `daemon-${agentBundle().hash}.log`)), "utf8");
      await waitFor(() => /work arrived while leaving: staying/.test(log()), 5000);
      // Left alone, it exits after all.
      await waitFor(() => !aliveOnHost(pid), 15_000);
    } finally {
      host.close();
    }
  }, 60_000);

  it("reconnectGraceMs 0: a daemon killed with SIGKILL: the wrapper names the cause; the next operation's daemon reaps the orphaned workload", async () => {
    const ws = new ExecWorkspace("daemon-kill", { reconnectGraceMs: 0 });
    cleanups.push(() => finish(ws));
    await ws.create();
    const h = ws.start({ argv: ["/bin/sh", "-c", "sleep 61 & echo ready; wait"], env: PATH });
    await h.waitOutput("ready\n");
    const layout = workspaceLayout(ws.configuredRoot, ws.workspaceId);
    const rec = readRecordFile(onHost(execRecordPath(layout, h.execId)))!;
    const workload = { pid: rec.pid!, startTime: rec.startTime! };
    requireView().kill(rec.agentPid, "SIGKILL");
    const r = await h.done;
    expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
    expect(r.stderr).toMatch(/^the host daemon on \S+ went away \(.*\); the operation it was running is lost\n$/);
    expect(r.code).toBe(1);
    // Nobody supervises the workload now; the next operation starts a daemon whose sweep reaps it.
    expect(requireView().isGone(workload.pid, workload.startTime)).toBe(false);
    const listed = await runCli(["processes", "--workspace-id", ws.workspaceId], {
      stdin: lifecycleRequest(ws.options),
      timeoutMs: 60_000,
    });
    expect(JSON.parse(listed.stdout.toString()).processes).toEqual([]);
    expect(requireView().isGone(workload.pid, workload.startTime)).toBe(true);
    expect(readRecordFile(onHost(execRecordPath(layout, h.execId)))).toMatchObject({
      state: "abandoned",
      reaped: true,
      agentPid: rec.agentPid,
    });
    const [next] = daemonsOf(ws.configuredRoot);
    expect(next?.pid).not.toBe(rec.agentPid);
  }, 120_000);

  it("a daemon stopped with SIGTERM reaps its live execs at once: each wrapper ends with one error saying so, nothing is left on the host", async () => {
    const ws = new ExecWorkspace("daemon-term");
    cleanups.push(() => finish(ws));
    await ws.create();
    const execs = await liveExecs(ws, 2, "62");
    const agentPid = execs[0]!.record()!.agentPid;
    const started = Date.now();
    requireView().kill(agentPid, "SIGTERM");
    for (const { pid, startTime } of execs) await waitFor(() => requireView().isGone(pid, startTime), 5000);
    expect(Date.now() - started).toBeLessThan(5000);
    for (const { h, record } of execs) {
      const r = await h.done;
      // Its stream closed with the daemon; re-attaching, it finds a daemon that no longer knows the exec.
      expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
      expect(r.stderr).toMatch(
        /^the execution on \S+ could not be resumed: the host daemon no longer knows this exec: .*the daemon restarted \(its workloads were reaped\)\n$/,
      );
      expect(r.code).toBe(1);
      expect(record()).toMatchObject({ state: "abandoned", reaped: true, agentPid });
    }
    await waitFor(() => !aliveOnHost(agentPid), 5000);
    expect(await ws.processes()).toEqual([]);
  }, 120_000);

  it("reconnectGraceMs 0: a reset link ends live execs with a network error naming the connection, reaps their workloads, and the broker reconnects", async () => {
    const { proxy, options } = await throughProxy({ reconnectGraceMs: 0 });
    const ws = new ExecWorkspace("daemon-cut", options);
    cleanups.push(() => finish(ws));
    await ws.create();
    const live = await liveExecs(ws, 3, "63");
    proxy.cutAll({ reset: true });
    for (const { h } of live) {
      const r = await h.done;
      expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
      expect(r.stderr).toMatch(/^connection to \S+ was lost/);
    }
    // The daemon saw its channel close: after the abandonment grace, every tree is reaped.
    await waitFor(() => live.every((e) => requireView().isGone(e.pid, e.startTime)), 10_000);
    await waitFor(() => live.every((e) => e.record()?.state === "abandoned" && e.record()?.reaped === true), 5000);
    const again = await ws.run({ argv: ["/bin/echo", "after the cut"] });
    expect(again.stdout.toString()).toBe("after the cut\n");
    expect((await brokerStats(parseRuntimeOptions(ws.options)))?.handshakes).toBe(2);
  }, 120_000);

  it("reconnectGraceMs 0: a silent link: both sides give up after three keepalive intervals, the workloads are reaped during the outage, the broker reconnects after it", async () => {
    const { proxy, options } = await throughProxy({ keepaliveIntervalMs: 1000, reconnectGraceMs: 0 });
    const ws = new ExecWorkspace("daemon-silent", options);
    cleanups.push(() => finish(ws));
    await ws.create();
    const live = await liveExecs(ws, 2, "64");
    const end = proxy.blackhole();
    let ended = false;
    cleanups.push(() => {
      if (!ended) end();
    });
    for (const { h } of live) {
      const r = await h.done;
      expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
      // The channel's keepalive or SSH's own (both three intervals) notices first.
      expect(r.stderr).toMatch(/^connection to \S+ was lost \((no answer from the peer for 3000 ms|the SSH connection closed)\)/);
    }
    // Still no byte (nor any close) crosses, yet the daemon noticed on its own and reaped.
    await waitFor(() => live.every((e) => requireView().isGone(e.pid, e.startTime)), 15_000);
    const daemonLog = readFileSync(onHost(join(ws.configuredRoot, "run", `daemon-${agentBundle().hash}.log`)), "utf8");
    expect(daemonLog).toMatch(/channel lost: no answer from the peer for 3000 ms/);
    await waitFor(() => live.every((e) => e.record()?.state === "abandoned" && e.record()?.reaped === true), 5000);
    end();
    ended = true;
    const again = await ws.run({ argv: ["/bin/echo", "after the outage"] });
    expect(again.stdout.toString()).toBe("after the outage\n");
  }, 120_000);
});
