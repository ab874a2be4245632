// A pool host going down under workspaces that live on it: every operation on them (inspect, exec,
// signal, pause, resume, destroy, merge-to-base, processes) fails with a network error naming the
// host once connectTimeoutMs passed, while the broker is still inside its reconnect window
// (max(5 s, 3 × connectTimeoutMs)), for a host that refuses connections and for one gone from the
// network, and for one whose link went silent with its SSH connection still up (no reset reaches
// anyone: the broker's connection is asked for a sign of life); nothing is deleted and the
// workspace works again once the host is back. A resumable
// exec's re-attachment still waits out the outage, and a single host's operation still waits for
// the reconnect window as it always did.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lifecycleRequest, runCli } from "../support/run-cli.js";
import { extraSshdSkipReason } from "../support/extra-sshd.js";
import { startPoolEndpoint, type PoolEndpoint } from "../support/pool-endpoints.js";
import { ExecWorkspace, sleep } from "../support/exec.js";
import { unless } from "../support/needs.js";
import { usePrivateBrokerDir } from "../support/private-broker-dir.js";
import type { Options } from "../../src/contract/index.js";

const skip = extraSshdSkipReason();
const CONNECT_MS = 3000;

interface Outcome {
  code: number | null;
  stdout: string;
  /** The last stderr line (the error message of a failure). */
  message: string;
}

async function op(options: Options, args: string[], extra: Record<string, unknown> = {}): Promise<Outcome> {
  const r = await runCli(args, { stdin: lifecycleRequest(options, extra), timeoutMs: 120_000 });
  const lines = r.stderr.trim().split("\n");
  return { code: r.code, stdout: r.stdout.toString("utf8"), message: lines[lines.length - 1] ?? "" };
}

describe("a pool host that goes down", unless(skip), () => {
  usePrivateBrokerDir("pool-down");
  let eps: PoolEndpoint[];
  /** One workspace per endpoint, created there (the other hosts cordoned). */
  const ws: ExecWorkspace[] = [];

  /** The pool; `only` cordons every other host (a create then lands on that one). */
  const poolOptions = (only?: number): Options =>
    ({
      connectTimeoutMs: CONNECT_MS,
      hosts: eps.map((e, i) => e.entry(only !== undefined && i !== only ? { cordoned: true } : {})),
    }) as Options;

  /** Every operation a workspace has after create, run at once, each through its own process. */
  function everyOperation(w: ExecWorkspace): Array<{ name: string; run: Promise<Outcome> }> {
    const options = poolOptions();
    const simple = ["inspect", "pause", "resume", "destroy", "merge-to-base", "processes"].map((name) => ({
      name,
      run: op(options, [name, "--workspace-id", w.workspaceId]),
    }));
    const signal = op(options, ["signal", "--workspace-id", w.workspaceId, "--exec-id", "a".repeat(32), "--signal", "SIGTERM"]);
    const exec = w
      .start({ argv: ["true"] })
      .done.then((r) => ({ code: r.code, stdout: r.stdout.toString("utf8"), message: r.stderr.trim() }));
    return [...simple, { name: "signal", run: signal }, { name: "exec", run: exec }];
  }

  /** Every operation fails with a network error naming the host, given up after connectTimeoutMs rather than the reconnect window (9000 ms here) or the keepalive; `named` the message's host part. */
  async function expectDownFailures(i: number, named?: RegExp): Promise<void> {
    const port = eps[i]!.port;
    const host = `hosts[${i}] `;
    for (const { name, run } of everyOperation(ws[i]!)) {
      const r = await run;
      expect(r.code, `${name}: ${r.message}`).toBe(5);
      expect(r.message, name).toContain(host);
      if (named) expect(r.message, name).toMatch(named);
      else
        expect(r.message, name).toContain(
          `127.0.0.1:${port} unreachable: the SSH connection dropped and was not back within ${CONNECT_MS} ms`,
        );
      expect(r.stdout, name).not.toContain("missing");
    }
  }

  async function expectReady(i: number): Promise<void> {
    const r = await op(poolOptions(), ["inspect", "--workspace-id", ws[i]!.workspaceId]);
    expect(r.code, r.message).toBe(0);
    expect((JSON.parse(r.stdout) as { inspection: { status: string } }).inspection.status).toBe("ready");
  }

  /** Host `i` ready, taken down (`takeDown`): every operation fails as it should; back: ready again (nothing deleted). */
  async function downAndBack(i: number, takeDown: () => Promise<void> | void, named?: RegExp): Promise<void> {
    await expectReady(i);
    await takeDown();
    try {
      await expectDownFailures(i, named);
    } finally {
      await eps[i]!.restore();
    }
    await expectReady(i);
  }

  beforeAll(async () => {
    eps = await Promise.all(["da", "db", "dc"].map((l) => startPoolEndpoint(l)));
    for (const i of [0, 1]) {
      const w = new ExecWorkspace(`pool-down-${i}`);
      (w as { options: Options }).options = poolOptions(i);
      await w.create();
      expect(w.root.startsWith(eps[i]!.root)).toBe(true);
      (w as { options: Options }).options = poolOptions();
      ws.push(w);
    }
  }, 120_000);
  afterAll(async () => {
    for (const w of ws) await w.cleanup().catch(() => undefined);
    await Promise.all((eps ?? []).map((e) => e.stop()));
  });

  it("a refusing host: every operation on its workspace fails with a network error naming it, nothing is deleted", async () => {
    await downAndBack(0, () => eps[0]!.refuse());
  }, 120_000);

  it("a resumable exec on a pool workspace still rides out an outage longer than connectTimeoutMs", async () => {
    const run = ws[1]!.start({ argv: ["sh", "-c", "for i in 1 2 3 4 5 6; do echo $i; sleep 1; done"] });
    await run.waitOutput("2\n");
    await eps[1]!.refuse();
    await sleep(CONNECT_MS + 2000);
    await eps[1]!.restore();
    const r = await run.done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.toString("utf8")).toBe("1\n2\n3\n4\n5\n6\n");
  }, 120_000);

  it("a host gone from the network (its link dropped, new connections unanswered): the same network error", async () => {
    await downAndBack(1, () => eps[1]!.blackhole());
  }, 120_000);

  it("a host whose link went silent with its connection up (no reset reaches anyone): a network error naming it, not the keepalive's minute", async () => {
    // The broker asked the silent link for a sign of life and gave up after connectTimeoutMs (the
    // keepalive would have said "for 45000 ms"); the exec, not answered yet, does not re-attach.
    await downAndBack(
      1,
      () => eps[1]!.stall(),
      new RegExp(`no answer from the peer within ${CONNECT_MS} ms|lost before the host answered the execution request`),
    );
  }, 120_000);

  it("a single host entry still waits for the broker's reconnect window", async () => {
    const single = { ...eps[2]!.entry(), connectTimeoutMs: CONNECT_MS } as Options;
    const probe = await op(single, ["inspect", "--workspace-id", "pool-down-none"]);
    expect(probe.code, probe.message).toBe(0);
    await eps[2]!.refuse();
    try {
      const r = await op(single, ["inspect", "--workspace-id", "pool-down-none"]);
      expect(r.code).toBe(5);
      expect(r.message).toContain(
        `SSH connection to 127.0.0.1:${eps[2]!.port} dropped and was not re-established within ${3 * CONNECT_MS} ms`,
      );
    } finally {
      await eps[2]!.restore();
    }
  }, 120_000);
});
