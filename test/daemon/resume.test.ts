// Resumable execs against the real sshd rig, through a fault proxy that resets every connection or
// blackholes all traffic for a time: a lost link (reset, silent outage, a sleeping laptop, a
// crashed broker) is not the end of an exec, pipes or a terminal the host daemon owns — output
// arrives exactly once and in order, stdin written during the outage arrives once, resizes issued
// during it are acknowledged once after it, the exit status is kept (sshd's own pty cannot survive
// and says so) — while a wrapper that dies during an outage (also one that began before the
// workload's `started`, and when the daemon refuses the first client-gone notice), or an outage
// longer than reconnectGraceMs, still leaves nothing on the host.
// (reconnectGraceMs 0, today's loss rule, is covered in daemon.test.ts; the minute-long silent links
// in resume-stalls.test.ts.)
import { createHash, randomBytes } from "node:crypto";
import { execFileSync, execSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { isGone } from "../../src/shared/proc-stat.js";
import { generateKeyPair } from "../../src/demo/key-pair.js";
import { alive, brokerStats, targetOf } from "../support/broker.js";
import { setDaemonDropsClientGone } from "../support/test-hooks.js";
import { ExecWorkspace, exitOf, sleep, type ExecHandle } from "../support/exec.js";
import { daemonsOf, finish, relaysOf, runtimeProcesses } from "../support/host-daemon.js";
import { waitFor } from "../rig/rig.js";
import { PATH, counter, daemonLog, expectOneToN, explained, faultRig, lines, recordOf } from "../support/resume.js";
import { needs, skipUnless } from "../support/needs.js";
import { onHost, requireView } from "../support/host-view.js";

const cleanups = suite();

const { proxiedWorkspace, outage } = faultRig(cleanups);

/** Waits until the daemon saw the link go silent and the broker dropped its SSH connection. */
async function linkDeclaredDead(ws: ExecWorkspace, options: ReturnType<typeof parseRuntimeOptions>): Promise<void> {
  await waitFor(() => /channel lost: no answer from the peer/.test(daemonLog(ws)), 30_000);
  for (let i = 0; i < 100 && (await brokerStats(options))?.connections !== 0; i++) await sleep(200);
}

/** Counts fd1 bytes as they arrive (the handle's own buffer is only read at the end). */
function byteCounter(h: ExecHandle): { bytes: number; reached(n: number, ms: number): Promise<void> } {
  const state = { bytes: 0 };
  (h.child.stdio[1] as Readable).on("data", (d: Buffer) => (state.bytes += d.length));
  return {
    get bytes() {
      return state.bytes;
    },
    reached: (n, ms) => waitFor(() => state.bytes >= n, ms),
  };
}

describe("resumable execs", () => {
  it("a reset after line 20: exit code kept, output exactly 1..N once and in order", async () => {
    const { proxy, ws } = await proxiedWorkspace("resume-reset");
    const N = 80;
    const h = ws.start({ argv: counter(N, 0.05, 7), env: PATH });
    await h.waitOutput("\n20\n", 30_000);
    proxy.cutAll({ reset: true });
    await expectOneToN(h, N, 7);
    // The link was really replaced (a second SSH handshake) and the exec re-attached, not restarted.
    expect((await brokerStats(parseRuntimeOptions(ws.options)))?.handshakes).toBe(2);
    expect(daemonLog(ws)).toMatch(/a detached exec was re-attached/);
  }, 120_000);

  it("50 MB of deterministic output across three resets at random points: sha256 identical", async () => {
    const { proxy, ws } = await proxiedWorkspace("resume-50mb");
    const count = 6_600_000; // `seq 1 6600000` is 51.7 MB
    const expected = createHash("sha256")
      .update(execFileSync("seq", ["1", String(count)], { maxBuffer: 64 * 1024 * 1024 }))
      .digest("hex");
    const total = Number(execSync(`seq 1 ${count} | wc -c`).toString().trim());
    const h = ws.start({ argv: ["/usr/bin/seq", "1", String(count)], env: PATH });
    const fd1 = byteCounter(h);
    const points = [0, 1, 2].map((i) => Math.floor(((i + 0.1 + Math.random() * 0.8) / 3) * total * 0.9));
    console.log(`resets after ${points.map((p) => `${(p / 1e6).toFixed(1)} MB`).join(", ")} of ${(total / 1e6).toFixed(1)} MB`);
    for (const at of points) {
      await fd1.reached(at, 240_000);
      proxy.cutAll({ reset: true });
    }
    const r = await h.done;
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.length).toBe(total);
    expect(createHash("sha256").update(r.stdout).digest("hex")).toBe(expected);
    expect((await brokerStats(parseRuntimeOptions(ws.options)))?.handshakes).toBe(4);
  }, 400_000);

  it("cat echoing stdin written before, during and after a reset: byte-identical", async () => {
    const { proxy, ws } = await proxiedWorkspace("resume-cat");
    const h = ws.start({ argv: ["/bin/cat"], env: PATH }, { keepStdinOpen: true });
    const before = randomBytes(300_000);
    const during = [randomBytes(200_000), randomBytes(200_000), randomBytes(200_000)];
    const after = randomBytes(300_000);
    h.stdin.write(before);
    const fd1 = byteCounter(h);
    await fd1.reached(before.length, 30_000);
    proxy.cutAll({ reset: true });
    // Written into the dead link, while the wrapper notices, and while it re-attaches.
    for (const chunk of during) {
      h.stdin.write(chunk);
      await sleep(150);
    }
    await fd1.reached(before.length + 600_000, 60_000);
    h.stdin.end(after);
    const r = await h.done;
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.equals(Buffer.concat([before, ...during, after]))).toBe(true);
    expect((await brokerStats(parseRuntimeOptions(ws.options)))?.handshakes).toBe(2);
  }, 120_000);

  it("a broker killed with SIGKILL mid-exec: the wrapper re-attaches through the replacement broker, nothing lost", async () => {
    const { ws } = await proxiedWorkspace("resume-broker-kill");
    const N = 80;
    const h = ws.start({ argv: counter(N, 0.05, 5), env: PATH });
    await h.waitOutput("\n20\n", 30_000);
    const old = (await brokerStats(parseRuntimeOptions(ws.options)))!.pid;
    process.kill(old, "SIGKILL");
    const r = await h.done;
    expect(exitOf(r)).toEqual({ code: 5, signal: null });
    expect(r.stdout.toString()).toBe(lines(N));
    const now = await brokerStats(parseRuntimeOptions(ws.options));
    expect(now?.pid).not.toBe(old);
    expect(alive(old)).toBe(false);
  }, 120_000);

  it("a wrapper SIGKILLed while the link is down: the workload lives through the outage, and is gone within 10 s after the link returns", async () => {
    const { proxy, ws } = await proxiedWorkspace("resume-wrapper-kill", { keepaliveIntervalMs: 1000 });
    const h = ws.start({ argv: ["/bin/sh", "-c", "sleep 71 & echo ready; wait"], env: PATH });
    await h.waitOutput("ready\n");
    const rec = recordOf(ws, h)!;
    const options = parseRuntimeOptions(ws.options);
    const end = outage(() => proxy.blackhole());
    // The broker declares the link dead and drops it; the wrapper then waits in the broker.
    await linkDeclaredDead(ws, options);
    expect((await brokerStats(options))?.connections).toBe(0);
    await sleep(2000);
    h.child.kill("SIGKILL");
    await h.done;
    // Link loss is not abandonment: nothing is reaped while the link is down.
    await sleep(3000);
    expect(requireView().isGone(rec.pid!, rec.startTime!)).toBe(false);
    console.log(`link back at ${new Date().toISOString()}`);
    end();
    await explained(ws, () => waitFor(() => requireView().isGone(rec.pid!, rec.startTime!), 10_000));
    await waitFor(() => recordOf(ws, h)?.state === "abandoned" && recordOf(ws, h)?.reaped === true, 5000);
    expect(await ws.processes()).toEqual([]);
  }, 120_000);

  it("an outage between the workload's start and its `started`, the wrapper SIGKILLed during it: the workload is gone within 10 s after the link returns", async () => {
    const { proxy, ws } = await proxiedWorkspace("resume-before-started", { keepaliveIntervalMs: 1000 });
    // `started` is held back 8 s after the workload runs, so the link goes while it is unsent.
    const h = ws.start({ argv: ["/bin/sh", "-c", "echo $$ > wl.pid; exec sleep 76"], env: PATH }, { delayIdentityMs: 8000 });
    const pidFile = onHost(join(ws.root, "wl.pid"));
    await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").endsWith("\n"), 30_000);
    const pid = Number(readFileSync(pidFile, "utf8"));
    const options = parseRuntimeOptions(ws.options);
    const end = outage(() => proxy.blackhole());
    await linkDeclaredDead(ws, options);
    await sleep(1000);
    h.child.kill("SIGKILL");
    const r = await h.done;
    expect(r.events).toEqual([]);
    // Past the held-back `started`: its publication found the link gone, and nothing is reaped yet.
    await sleep(5000);
    expect(requireView().isGone(pid)).toBe(false);
    end();
    await explained(ws, () => waitFor(() => requireView().isGone(pid), 10_000));
    expect(await ws.processes()).toEqual([]);
  }, 120_000);

  it("a client-gone notice the daemon refuses is sent again while the link stays up: the workload is still gone within 10 s", async () => {
    const { proxy, ws } = await proxiedWorkspace("resume-notice-retry", { keepaliveIntervalMs: 1000 });
    setDaemonDropsClientGone(ws.configuredRoot, 1);
    const h = ws.start({ argv: ["/bin/sh", "-c", "sleep 74 & echo ready; wait"], env: PATH });
    await h.waitOutput("ready\n");
    const rec = recordOf(ws, h)!;
    const options = parseRuntimeOptions(ws.options);
    const end = outage(() => proxy.blackhole());
    await linkDeclaredDead(ws, options);
    // The wrapper waits in the broker by now (its first re-attach goes at once).
    await sleep(1000);
    h.child.kill("SIGKILL");
    await h.done;
    await sleep(1000);
    end();
    await explained(ws, () => waitFor(() => requireView().isGone(rec.pid!, rec.startTime!), 10_000));
    expect(daemonLog(ws)).toMatch(/test hook: a client-gone notice was refused unapplied/);
    expect(readFileSync((await targetOf(options)).paths.log, "utf8")).toMatch(
      /reporting a gone client failed \(tried again shortly\)[^]*reported gone to the host daemon/,
    );
    await waitFor(() => recordOf(ws, h)?.state === "abandoned" && recordOf(ws, h)?.reaped === true, 5000);
    // Nothing pending keeps the broker busy: its connection carries no channel but the daemon's.
    expect((await brokerStats(options))?.liveChannels).toBe(0);
  }, 120_000);

  it("an outage longer than reconnectGraceMs: reaped on the host during it, the wrapper exits with a network error naming host and grace, nothing left", async () => {
    const { proxy, ws } = await proxiedWorkspace("resume-grace", { keepaliveIntervalMs: 1000, reconnectGraceMs: 5000 });
    const h = ws.start({ argv: ["/bin/sh", "-c", "sleep 72 & echo ready; wait"], env: PATH });
    await h.waitOutput("ready\n");
    const rec = recordOf(ws, h)!;
    const end = outage(() => proxy.blackhole());
    const r = await h.done;
    expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
    expect(r.stderr).toMatch(
      /^connection to 127\.0\.0\.1 was lost and not re-established within reconnectGraceMs \(5000 ms\); the execution was stopped on the host/,
    );
    expect((r.events[1] as { message: string }).message).toBe(r.stderr.trimEnd());
    expect(r.code).toBe(1);
    // The daemon gave up at the same bound, still during the outage.
    await explained(ws, () => waitFor(() => requireView().isGone(rec.pid!, rec.startTime!), 20_000));
    expect(daemonLog(ws)).toMatch(/reconnect grace \(5000 ms\) ran out: reaping it/);
    await waitFor(() => recordOf(ws, h)?.state === "abandoned" && recordOf(ws, h)?.reaped === true, 5000);
    end();
    expect(await ws.processes()).toEqual([]);
  }, 120_000);

  it("a signal issued during an outage is delivered after it, once", async () => {
    const { proxy, ws } = await proxiedWorkspace("resume-signal", { keepaliveIntervalMs: 1000 });
    const script =
      'n=0; trap \'n=$((n+1)); echo "term $n"\' TERM; echo ready; while [ ! -e stop ]; do sleep 0.1; done; echo "terms $n"; exit 9';
    const h = ws.start({ argv: ["/bin/sh", "-c", script], env: PATH });
    await h.waitOutput("ready\n");
    const rec = recordOf(ws, h)!;
    const options = parseRuntimeOptions(ws.options);
    const end = outage(() => proxy.blackhole());
    await linkDeclaredDead(ws, options);
    // Paseo forwards SIGTERM to the wrapper while the link is down.
    h.child.kill("SIGTERM");
    await sleep(1500);
    expect(h.output().toString()).toBe("ready\n");
    end();
    await h.waitOutput("term 1\n", 30_000);
    writeFileSync(onHost(join(ws.root, "stop")), "");
    const r = await h.done;
    expect(exitOf(r)).toEqual({ code: 9, signal: null });
    expect(r.stdout.toString()).toBe("ready\nterm 1\nterms 1\n");
    expect(requireView().isGone(rec.pid!, rec.startTime!)).toBe(true);
  }, 120_000);

  it("an exec started while the host cannot be reached is refused at once with the broker's reconnect error (only a re-attachment waits)", async () => {
    // connectTimeoutMs 1000: a 5 s reconnect window.
    const { proxy, ws } = await proxiedWorkspace("resume-unreachable", { connectTimeoutMs: 1000 });
    expect(exitOf(await ws.run({ argv: ["/bin/true"] }))).toEqual({ code: 0, signal: null });
    await proxy.close();
    const r = await ws.run({ argv: ["/bin/echo", "never"], env: PATH });
    expect(r.fd4).toBe("");
    expect(r.stderr).toMatch(/^SSH connection to 127\.0\.0\.1:\d+ dropped and was not re-established within 5000 ms/);
    expect(r.code).toBe(5);
  }, 120_000);

  it("a PTY exec on a terminal the daemon owns: a reset after line 20 keeps the exit code and output 1..N once and in order; resizes issued during the outage are coalesced and each acknowledged once after it", async (ctx) => {
    skipUnless(ctx, needs.hostTerminal());
    const { proxy, ws } = await proxiedWorkspace("resume-pty");
    const N = 80;
    // After the count the workload waits until the terminal has the last size sent during the
    // outage (no timing assumption), then prints it.
    const script = `i=1; while [ $i -le ${N} ]; do echo $i; sleep 0.05; i=$((i+1)); done; while [ "$(stty size)" != "33 111" ]; do sleep 0.05; done; echo "size $(stty size)"; exit 6`;
    const h = ws.start({ argv: ["/bin/sh", "-c", script], env: PATH, stdio: { kind: "pty", rows: 24, cols: 80 } });
    await h.waitOutput("\n20\r\n", 30_000);
    proxy.cutAll({ reset: true });
    h.sendControl({ type: "resize", protocolVersion: 1, id: 1, rows: 31, cols: 101 });
    h.sendControl({ type: "resize", protocolVersion: 1, id: 2, rows: 33, cols: 111 });
    const r = await h.done;
    expect(exitOf(r)).toEqual({ code: 6, signal: null });
    expect(r.stdout.toString().replace(/\r\n/g, "\n")).toBe(`${lines(N)}size 33 111\n`);
    expect(r.events.filter((e) => e.type === "resized")).toEqual([
      { type: "resized", protocolVersion: 1, id: 1 },
      { type: "resized", protocolVersion: 1, id: 2 },
    ]);
    // The link was really replaced and the exec re-attached, not restarted.
    expect((await brokerStats(parseRuntimeOptions(ws.options)))?.handshakes).toBe(2);
    expect(daemonLog(ws)).toMatch(/a detached exec was re-attached/);
  }, 120_000);

  it("a PTY exec on sshd's pty (the host has no way to own one) ends with a clear network error on a reset, and its tree is reaped", async (ctx) => {
    skipUnless(ctx, needs.serverPty());
    const { proxy, ws } = await proxiedWorkspace("resume-sshd-pty");
    ws.terminalSearchPath = "";
    const h = ws.start({ argv: ["/bin/sh", "-c", "echo ready; exec sleep 75"], env: PATH, stdio: { kind: "pty", rows: 24, cols: 80 } });
    await h.waitOutput("ready");
    const rec = recordOf(ws, h)!;
    proxy.cutAll({ reset: true });
    const r = await h.done;
    expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
    expect(r.stderr).toMatch(/^connection to \S+ was lost/);
    expect(r.code).toBe(1);
    await explained(ws, () => waitFor(() => requireView().isGone(rec.pid!, rec.startTime!), 10_000));
    await waitFor(() => recordOf(ws, h)?.state === "abandoned" && recordOf(ws, h)?.reaped === true, 5000);
  }, 120_000);

  it("the host key is verified again on every reconnect: a changed key ends the exec with a host-key error", async () => {
    const { proxy, ws, knownHostsFile } = await proxiedWorkspace("resume-hostkey", { reconnectGraceMs: 5000 });
    const h = ws.start({ argv: ["/bin/sh", "-c", "echo ready; exec sleep 73"], env: PATH });
    await h.waitOutput("ready\n");
    const port = parseRuntimeOptions(ws.options).port;
    // Another key for the same name (as after a man-in-the-middle), then the link drops.
    const other = generateKeyPair({ type: "ed25519" }).public.split(" ").slice(0, 2).join(" ");
    writeFileSync(knownHostsFile, `[127.0.0.1]:${port} ${other}\n`);
    proxy.cutAll({ reset: true });
    const r = await h.done;
    expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
    expect(r.stderr).toMatch(/host key/i);
    expect(r.code).toBe(1);
  }, 120_000);

  it("a daemon killed with SIGKILL: the re-attach finds a new daemon that swept the workload, and says the exec could not be resumed", async () => {
    const ws = new ExecWorkspace("resume-daemon-kill");
    cleanups.push(() => finish(ws));
    await ws.create();
    const h = ws.start({ argv: ["/bin/sh", "-c", "sleep 74 & echo ready; wait"], env: PATH });
    await h.waitOutput("ready\n");
    const rec = recordOf(ws, h)!;
    requireView().kill(rec.agentPid, "SIGKILL");
    const r = await h.done;
    expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
    expect(r.stderr).toMatch(/^the execution on \S+ could not be resumed: the host daemon no longer knows this exec/);
    expect(r.code).toBe(1);
    expect(requireView().isGone(rec.pid!, rec.startTime!)).toBe(true);
    expect(recordOf(ws, h)).toMatchObject({ state: "abandoned", reaped: true, agentPid: rec.agentPid });
    expect(daemonsOf(ws.configuredRoot).map((d) => d.pid)).not.toContain(rec.agentPid);
    // The new daemon, and on a server that forwards no Unix sockets the current link's relay.
    const relays = relaysOf(ws.configuredRoot);
    expect(relays.length).toBeLessThanOrEqual(1);
    expect(runtimeProcesses(ws.configuredRoot).length - relays.length).toBeLessThanOrEqual(1);
  }, 120_000);
});
