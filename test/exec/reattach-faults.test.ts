// The resumable-exec rules against the in-process fault double (test/support/fault-link.ts): the
// real wrapper, DaemonLink, mux and daemon-side ExecSession, with reset, blackhole and slow links
// instead of an sshd and a fault proxy, so each case runs in about a second. The same rules against
// the real host daemon through sshd: test/daemon/resume.test.ts and long-outage.test.ts.
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { lines } from "../support/resume.js";
import { faultExec, say } from "../support/fault-exec.js";
import type { ExecContext } from "../../src/remote-agent/exec/exec-session.js";
import { waitFor } from "../rig/rig.js";

const until = (what: string, cond: () => boolean, ms = 5000) =>
  waitFor(cond, ms).catch(() => {
    throw new Error(`never happened: ${what}`);
  });

/** The wrapper's exit status, bounded: a lost or repeated frame shows as a wrapper that never ends. */
const exitStatus = (x: { code: Promise<number> }, ms = 10_000): Promise<number> =>
  Promise.race([
    x.code,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`the exec did not end within ${ms} ms`)), ms).unref()),
  ]);

/** Prints 1..n, one line every `everyMs`, then exits 0. */
const counter =
  (n: number, everyMs: number) =>
  (ctx: ExecContext): void => {
    let i = 0;
    const t = setInterval(() => {
      i++;
      say(ctx, `${i}\n`);
      if (i === n) {
        clearInterval(t);
        ctx.sendJson({ type: "exit", code: 0, signal: null });
      }
    }, everyMs);
    ctx.onClose(() => clearInterval(t));
  };

/** Every connection is cut and new ones refused for 300 ms. */
async function outage(x: { net: { reset(): void; heal(): void } }): Promise<void> {
  x.net.reset();
  await new Promise((r) => setTimeout(r, 300));
  x.net.heal();
}

/** The exec re-attached once and ended 0 with all `n` lines of its stdout, once each, in order. */
async function expectResumedWhole(x: ReturnType<typeof faultExec>, n: number): Promise<void> {
  expect(await exitStatus(x)).toBe(0);
  expect(x.stdout()).toBe(lines(n));
  expect(x.stderr()).toBe("");
  expect(x.view.attaches).toBe(1);
}

const cleanups = suite();

function run(opts: Parameters<typeof faultExec>[0]) {
  const x = faultExec(opts);
  cleanups.push(() => {
    x.net.heal();
    x.link.close();
  });
  return x;
}

describe("resumable exec over a faulty link (in-process double)", () => {
  it("a reset mid-output: the exec re-attaches and stdout holds every line once, in order", async () => {
    const x = run({ graceMs: 5000, keepaliveMs: 1000, workload: counter(40, 10) });
    // Slow enough that frames (and their acks) are in flight when the reset hits.
    x.net.slow({ delayMs: 15 });
    await until("output under way", () => x.stdout().split("\n").length > 10);
    expect(x.stdout()).not.toBe(lines(40));
    await outage(x);
    await expectResumedWhole(x, 40);
    expect(x.net.connections.length).toBe(2);
    expect(x.events().map((e) => e.type)).toEqual(["started", "eof", "exit"]);
  });

  it("a slow, throughput-limited link is no outage: nothing is re-attached, the output is exact", async () => {
    const x = run({ graceMs: 5000, keepaliveMs: 200, workload: counter(30, 10) });
    // Every chunk arrives 100 ms late at 20 kB/s: slower than the output, well within three keepalive intervals.
    x.net.slow({ delayMs: 100, bytesPerSecond: 20_000 });
    expect(await exitStatus(x)).toBe(0);
    expect(x.stdout()).toBe(lines(30));
    expect(x.linkLosses).toEqual([]);
    expect(x.view.attaches).toBe(0);
    expect(x.net.connections.length).toBe(1);
  });

  it("a blackhole beyond the keepalive: the wrapper's side declares the link dead itself and re-attaches once it heals", async () => {
    const x = run({ graceMs: 5000, keepaliveMs: 100, workload: counter(30, 20) });
    await until("output under way", () => x.stdout().split("\n").length > 5);
    x.net.blackhole();
    const first = x.net.connections[0]!;
    // No FIN or reset arrives: only the keepalive (3 x 100 ms of silence) can tell the link is dead.
    await until("link declared dead", () => x.linkLosses.length === 1, 3000);
    // Closed by its own side while nothing crossed the blackhole (the daemon's side, which may
    // have given up first, could not tell it): the keepalive did it.
    expect(first.fate.paseo).toBe("own");
    expect(first.fate.daemon).not.toBe("reset");
    expect(x.view.attaches).toBe(0);
    x.net.heal();
    expect(await exitStatus(x)).toBe(0);
    expect(x.stdout()).toBe(lines(30));
    expect(x.view.attaches).toBe(1);
    expect(x.net.connections.length).toBe(2);
  });

  it("an outage longer than the grace ends the exec with a network error naming the host and the grace; the daemon reaps it", async () => {
    const x = run({ graceMs: 1000, keepaliveMs: 1000, workload: counter(1000, 20) });
    await until("output under way", () => x.stdout().length > 0);
    x.net.reset();
    expect(await exitStatus(x)).toBe(1);
    const message = "connection to fault.test was lost and not re-established within reconnectGraceMs (1000 ms)";
    expect(x.stderr()).toContain(message);
    const events = x.events();
    expect(events.map((e) => e.type)).toEqual(["started", "error"]);
    expect(events[1]).toMatchObject({ message: expect.stringContaining(message) });
    expect(x.net.failedDials).toBeGreaterThan(0);
    expect(x.view.attaches).toBe(0);
    await until("daemon side expired", () => x.view.lost !== null, 3000);
    expect(x.view.lost).toBe("expired");
  });

  it("stdin written during an outage reaches the workload once, in order, after the re-attachment", async () => {
    const x = run({
      graceMs: 5000,
      keepaliveMs: 1000,
      workload: (ctx, view) => {
        const t = setInterval(() => {
          if (!view.stdinEnded) return;
          clearInterval(t);
          say(ctx, Buffer.concat(view.stdin).toString());
          ctx.sendJson({ type: "exit", code: 0, signal: null });
        }, 10);
      },
    });
    const sent: string[] = [];
    const write = (s: string) => {
      sent.push(s);
      x.stdin.write(s);
    };
    x.net.slow({ delayMs: 20 });
    for (let i = 0; i < 5; i++) write(`before ${i}\n`);
    await until("some stdin taken", () => x.view.stdin.length > 0);
    // Some of it is still in flight (slow link) when the link dies; more is written during the outage.
    x.net.reset();
    for (let i = 0; i < 5; i++) write(`during ${i}\n`);
    await new Promise((r) => setTimeout(r, 300));
    for (let i = 5; i < 10; i++) write(`during ${i}\n`);
    x.net.heal();
    await until("re-attached", () => x.view.attaches === 1);
    write("after\n");
    x.stdin.end();
    expect(await exitStatus(x)).toBe(0);
    expect(Buffer.concat(x.view.stdin).toString()).toBe(sent.join(""));
    expect(x.stdout()).toBe(sent.join(""));
  });

  it("a remote failure on attach that is not the unknown-exec code is retried: the exec resumes, nothing is lost", async () => {
    const x = run({
      graceMs: 5000,
      keepaliveMs: 1000,
      workload: counter(40, 10),
      // Class "remote", as the daemon's unknown-exec answer, but another failure: it proves nothing about the exec.
      attachRefusals: [{ errorClass: "remote", message: "exec.attach: an unexpected failure in the host daemon" }],
    });
    await until("output under way", () => x.stdout().split("\n").length > 10);
    await outage(x);
    await expectResumedWhole(x, 40);
  });

  it("the daemon's unknown-exec answer ends the exec at once: it could not be resumed", async () => {
    const x = run({
      graceMs: 3000,
      keepaliveMs: 1000,
      workload: counter(1000, 20),
      attachRefusals: [{ errorClass: "remote", message: "the host daemon no longer knows this exec", code: "unknown-exec" }],
    });
    await until("output under way", () => x.stdout().length > 0);
    x.net.reset();
    await new Promise((r) => setTimeout(r, 300));
    x.net.heal();
    // The code, not the grace, ends it (past the grace the message would name reconnectGraceMs).
    expect(await exitStatus(x)).toBe(1);
    expect(x.stderr()).toMatch(/the execution on fault\.test could not be resumed: the host daemon no longer knows this exec/);
    expect(x.view.attaches).toBe(0);
  });
});
