// Large or hostile input to the exec wrapper over the real sshd: memory stays bounded whatever a
// writer does, and what cannot be handled fails with one clear line.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecWorkspace, exitOf, flood, rssOf } from "../support/exec.js";
import { daemonsOf } from "../support/host-daemon.js";
import { alive, brokerStats } from "../support/broker.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { waitFor, rig } from "../rig/rig.js";
import { needs, skipUnless } from "../support/needs.js";

const MiB = 1024 * 1024;

describe("exec under large or hostile input", () => {
  // A short idle time so a broker that can still exit is seen exiting (see the PTY flood test).
  const ws = new ExecWorkspace("exec-limits", { brokerIdleMs: 1000 });
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("fd3: 400 MB without a newline is refused at the line bound; the wrapper's memory stays bounded", async () => {
    const h = ws.start({ argv: ["/bin/true"] }, { rawEnvelope: "", keepControlOpen: true });
    const { written, maxRss } = await flood(h.control, h.child.pid!, 400 * MiB, Buffer.alloc(MiB, "a"));
    h.control.end();
    const r = await h.done;
    console.log(
      `fd3 flood: ${(written / MiB).toFixed(0)} MiB written before the wrapper stopped reading; max wrapper RSS ${(maxRss / MiB).toFixed(0)} MiB`,
    );
    expect(r.stderr.trim()).toBe("fd3 control frame exceeds 16 MiB without a newline");
    expect(r.code).toBe(2);
    expect(r.fd4).toBe("");
    expect(maxRss).toBeLessThan(150 * MiB);
  });

  // The resume layer keeps every frame until it is acknowledged; an acknowledged one must be let go
  // at once (each direction kept 1,024 of them alive: the wrapper reached 176-179 MiB, the host
  // daemon 164-177 MiB).
  it("pipes: 256 MB into fd0 of `wc -c` arrive whole and the wrapper's RSS stays under 150 MiB", async () => {
    const h = ws.start({ argv: ["wc", "-c"] }, { keepStdinOpen: true });
    const { written, maxRss } = await flood(h.stdin, h.child.pid!, 256 * MiB, Buffer.alloc(MiB, "a"));
    h.stdin.end();
    const r = await h.done;
    console.log(`fd0 256 MB: max wrapper RSS ${(maxRss / MiB).toFixed(0)} MiB`);
    expect(written).toBe(256 * MiB);
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.toString("utf8").trim()).toBe(String(256 * MiB));
    expect(maxRss).toBeLessThan(150 * MiB);
  });

  it("pipes: 192 MiB of output arrive whole and the host daemon's RSS stays under 150 MiB", async (ctx) => {
    skipUnless(ctx, needs.localHost("reads the host daemon's RSS"));
    await ws.run({ argv: ["/bin/true"] });
    const [daemon] = daemonsOf(ws.configuredRoot);
    expect(daemon).toBeDefined();
    let maxRss = rssOf(daemon!.pid);
    const sampler = setInterval(() => (maxRss = Math.max(maxRss, rssOf(daemon!.pid))), 20);
    try {
      const r = await ws.run({ argv: ["head", "-c", String(192 * MiB), "/dev/zero"] });
      expect(exitOf(r)).toEqual({ code: 0, signal: null });
      expect(r.stdout.length).toBe(192 * MiB);
      expect(r.stdout.every((b) => b === 0)).toBe(true);
    } finally {
      clearInterval(sampler);
    }
    console.log(`fd1 192 MiB: max host daemon RSS ${(maxRss / MiB).toFixed(0)} MiB`);
    expect(daemonsOf(ws.configuredRoot).map((d) => d.pid)).toEqual([daemon!.pid]);
    expect(maxRss).toBeLessThan(150 * MiB);
  });

  const PRINT_SIZES = "console.log(Object.keys(process.env).sort().map((k) => k + '=' + process.env[k].length).join(' '))";
  const bigEnv = (count: number, size: number) =>
    Object.fromEntries(Array.from({ length: count }, (_, i) => [`BIG${String(i).padStart(2, "0")}`, String(i % 10).repeat(size)]));

  it.for([["pipes"], ["pty"]])("%s: an envelope over 1 MiB that execve accepts runs (ten env values of 120 KB)", async ([kind], ctx) => {
    if (kind === "pty") skipUnless(ctx, needs.pty());
    const env = bigEnv(10, 120_000);
    const stdio = kind === "pty" ? { kind: "pty" as const, rows: 24, cols: 200 } : { kind: "pipes" as const };
    const r = await ws.run({ argv: [rig().remoteNode, "-e", PRINT_SIZES], env, stdio });
    expect(r.stderr).toBe("");
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.toString("utf8").trim()).toBe(
      Object.keys(env)
        .map((k) => `${k}=120000`)
        .join(" "),
    );
  });

  it("an envelope execve would refuse is an input error naming the limit; nothing is launched", async () => {
    const total = await ws.run({ argv: ["/bin/true"], env: bigEnv(60, 120_000) });
    expect(total.code).toBe(2);
    expect(total.fd4).toBe("");
    expect(total.stderr.trim()).toMatch(
      /^Invalid spawn envelope: argv and env need 72\d{5} bytes, more than the \d+ bytes execve accepts on this host \(ARG_MAX\)$/,
    );
    const one = await ws.run({ argv: ["/bin/true"], env: { HUGE: "x".repeat(200_000) } });
    expect(one.code).toBe(2);
    expect(one.fd4).toBe("");
    expect(one.stderr.trim()).toBe(
      "Invalid spawn envelope: env HUGE takes 200006 bytes, more than the 131072 bytes execve accepts for one string on this host (MAX_ARG_STRLEN)",
    );
  });

  // Terminal input in lines: a `sleep` never reads them, so the terminal's input queue fills and
  // everything behind it (sshd, SSH window, broker, wrapper) must hold the writer back.
  const lines = Buffer.from(("y".repeat(1023) + "\n").repeat(256));
  const pty = { kind: "pty" as const, rows: 24, cols: 80 };

  it("PTY: 500 MB offered to fd0 of a PTY `sleep` keeps the wrapper's memory bounded; the exec still answers", async (ctx) => {
    skipUnless(ctx, needs.pty());
    const h = ws.start({ argv: ["/bin/sleep", "600"], stdio: pty });
    await h.waitEvent("started");
    const { written, maxRss } = await flood(h.stdin, h.child.pid!, 500 * MiB, lines);
    console.log(
      `PTY stdin flood: ${(written / MiB).toFixed(0)} MiB taken by the wrapper; max wrapper RSS ${(maxRss / MiB).toFixed(0)} MiB`,
    );
    expect(maxRss).toBeLessThan(150 * MiB);
    h.sendControl({ type: "signal", protocolVersion: 1, signal: "SIGKILL" });
    expect(exitOf(await h.done)).toEqual({ code: null, signal: "SIGKILL" });
    // The terminal's echo left unread output in the broker's PTY channel: it must still close, or
    // the broker counts it open forever and never exits.
    const broker = await brokerStats(parseRuntimeOptions(ws.options));
    expect(broker).not.toBeNull();
    await waitFor(() => !alive(broker!.pid), 15_000);
  });

  it("PTY: a wrapper killed while terminal output is unread leaves a broker that still exits when idle", async (ctx) => {
    skipUnless(ctx, needs.pty());
    const h = ws.start({ argv: ["/usr/bin/yes"], stdio: pty }, { pauseStdout: true });
    await h.waitEvent("started");
    await new Promise((r) => setTimeout(r, 500));
    process.kill(-h.child.pid!, "SIGKILL");
    await h.done;
    const broker = await brokerStats(parseRuntimeOptions(ws.options));
    expect(broker).not.toBeNull();
    await waitFor(() => !alive(broker!.pid), 15_000);
  });

  it("PTY: input a program reads keeps flowing under the same bound", async (ctx) => {
    skipUnless(ctx, needs.pty());
    const h = ws.start({ argv: ["/bin/sh", "-c", "head -c 4000000 >/dev/null"], env: { PATH: "/usr/bin:/bin" }, stdio: pty });
    await h.waitEvent("started");
    const { maxRss } = await flood(h.stdin, h.child.pid!, 500 * MiB, lines);
    expect(maxRss).toBeLessThan(150 * MiB);
    expect(exitOf(await h.done)).toEqual({ code: 0, signal: null });
  });
});

describe("exec under large input, connected in-process (broker: false)", () => {
  const ws = new ExecWorkspace("exec-limits-direct", { broker: false });
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("PTY: 500 MB offered to fd0 of a PTY `sleep` keeps the wrapper's memory bounded", async (ctx) => {
    skipUnless(ctx, needs.pty());
    const h = ws.start({ argv: ["/bin/sleep", "600"], stdio: { kind: "pty", rows: 24, cols: 80 } });
    await h.waitEvent("started");
    const { maxRss } = await flood(h.stdin, h.child.pid!, 500 * MiB, Buffer.from(("y".repeat(1023) + "\n").repeat(256)));
    expect(maxRss).toBeLessThan(150 * MiB);
    h.sendControl({ type: "signal", protocolVersion: 1, signal: "SIGKILL" });
    expect(exitOf(await h.done)).toEqual({ code: null, signal: "SIGKILL" });
  });
});
