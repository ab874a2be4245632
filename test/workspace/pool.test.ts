// A pool of three SSH endpoints behind one runtime entry (docs/pool.md): creates spread by live load,
// every later operation reaches the workspace's own host (from its placement record, or by asking
// the hosts once the record is lost), a cordoned host takes nothing new, a refusing host is skipped
// by creates, fails its own workspaces' operations with a network error naming it, and is left
// untouched by reconcile until it is back; hostsCommand supplies and changes the host list.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { readPlacement, recentlyDown, removePlacement } from "../../src/workspace/pool/pool-state.js";
import { parseEntries } from "../../src/workspace/pool/pool-options.js";
import { brokerDir } from "../../src/broker/common/broker-paths.js";
import { seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { runCli, TEST_RUNTIME_INSTANCE_ID } from "../support/run-cli.js";
import { dirInput, progressLines } from "../support/workspace.js";
import { extraSshdSkipReason } from "../support/extra-sshd.js";
import { poolOp, startPoolEndpoint, type PoolEndpoint, type PoolOutcome } from "../support/pool-endpoints.js";
import { ExecWorkspace } from "../support/exec.js";
import { unless } from "../support/needs.js";
import { usePrivateBrokerDir } from "../support/private-broker-dir.js";
import type { Options } from "../../src/contract/index.js";

const skip = extraSshdSkipReason();

type Outcome = PoolOutcome;
const op = poolOp;

/** A process's command line, spaces between its arguments ("" once it is gone or a zombie). */
function cmdline(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return "";
  }
}

const newId = (label: string) => `pool-${label}-${randomBytes(4).toString("hex")}`;

describe("a pool of three hosts", unless(skip), () => {
  usePrivateBrokerDir("pool");
  // Called after usePrivateBrokerDir: its afterAll runs after these cleanups.
  const s = suite("all");
  let eps: PoolEndpoint[];
  let fixture: FixtureRepo;
  let base: string;
  /** Workspaces created so far, by id: the endpoint index that holds them. */
  const where = new Map<string, number>();

  const poolOptions = (entryExtra: Array<Record<string, unknown>> = []): Options =>
    ({ connectTimeoutMs: 3000, hosts: eps.map((e, i) => e.entry(entryExtra[i] ?? {})) }) as Options;
  const holder = (id: string): number[] => eps.flatMap((e, i) => (existsSync(workspaceLayout(e.root, id).dir) ? [i] : []));
  const held = (i: number): number => {
    const dir = join(eps[i]!.root, "workspaces");
    return existsSync(dir) ? readdirSync(dir).filter((n) => n.startsWith("paseo-ws-")).length : 0;
  };
  async function create(options: Options, id: string): Promise<Outcome> {
    const r = await op(options, ["create", "--workspace-id", id], { input: dirInput(id, fixture.path) });
    if (r.code === 0) {
      const on = holder(id);
      expect(on).toHaveLength(1);
      where.set(id, on[0]!);
    }
    return r;
  }

  beforeAll(async () => {
    base = s.tmp("paseo-pool-");
    fixture = seedRepo(base);
    s.push(() => Promise.all((eps ?? []).map((e) => e.stop())));
    eps = await Promise.all(["a", "b", "c"].map((l) => startPoolEndpoint(l)));
  }, 60_000);

  it("spreads 9 creates over the three hosts (each at least 2) and names the chosen host in progress", async () => {
    const options = poolOptions();
    for (let batch = 0; batch < 3; batch++) {
      const ids = [0, 1, 2].map(() => newId("spread"));
      const results = await Promise.all(ids.map((id) => create(options, id)));
      for (const r of results) {
        expect(r.code, r.stderr).toBe(0);
        const placed = progressLines(r.stderr).find((p) => p.phase === "placed") as { host?: string } | undefined;
        expect(placed?.host).toMatch(/^hosts\[[012]\] .*@127\.0\.0\.1:\d+$/);
      }
      for (const [i, id] of ids.entries()) {
        const placed = progressLines(results[i]!.stderr).find((p) => p.phase === "placed") as { host?: string };
        expect(placed.host).toContain(`:${eps[where.get(id)!]!.port}`);
        expect(readPlacement(TEST_RUNTIME_INSTANCE_ID, id)?.label).toBe(placed.host);
      }
    }
    const counts = [0, 1, 2].map(held);
    expect(counts.reduce((a, b) => a + b)).toBe(9);
    for (const c of counts) expect(c).toBeGreaterThanOrEqual(2);
  }, 300_000);

  it("sends every operation to the workspace's own host", async () => {
    const options = poolOptions();
    for (const [id, i] of where) {
      const r = await op(options, ["inspect", "--workspace-id", id]);
      expect(r.code, r.stderr).toBe(0);
      const { inspection } = JSON.parse(r.stdout) as { inspection: { status: string; placement: { cwd: string } } };
      expect(inspection.status).toBe("ready");
      expect(inspection.placement.cwd.startsWith(eps[i]!.root)).toBe(true);
    }
    // An exec runs on its workspace's host, in its checkout.
    const ws = new ExecWorkspace("pool-exec");
    (ws as { options: Options }).options = options;
    await ws.create();
    const on = holder(ws.workspaceId);
    expect(on).toHaveLength(1);
    where.set(ws.workspaceId, on[0]!);
    const result = await ws.start({ argv: ["pwd"] }).done;
    expect(result.stdout.toString("utf8").trim()).toBe(ws.root);
    expect(ws.root.startsWith(eps[on[0]!]!.root)).toBe(true);
    // Pause and resume reach it too.
    expect((await op(options, ["pause", "--workspace-id", ws.workspaceId])).code).toBe(0);
    const resumed = await op(options, ["resume", "--workspace-id", ws.workspaceId]);
    expect(resumed.code, resumed.stderr).toBe(0);
  }, 300_000);

  it("finds a workspace whose placement record was deleted by asking the hosts, and records it again", async () => {
    const [id, i] = [...where][0]!;
    removePlacement(TEST_RUNTIME_INSTANCE_ID, id);
    expect(readPlacement(TEST_RUNTIME_INSTANCE_ID, id)).toBeNull();
    const r = await op(poolOptions(), ["inspect", "--workspace-id", id]);
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { inspection: { placement: { cwd: string } } }).inspection.placement.cwd.startsWith(eps[i]!.root)).toBe(
      true,
    );
    expect(readPlacement(TEST_RUNTIME_INSTANCE_ID, id)?.label).toContain(`:${eps[i]!.port}`);
  }, 120_000);

  it("places nothing new on a cordoned host; its workspaces keep working", async () => {
    const options = poolOptions([{}, { cordoned: true }, {}]);
    const before = held(1);
    for (let n = 0; n < 3; n++) expect((await create(options, newId("cordon"))).code).toBe(0);
    expect(held(1)).toBe(before);
    const onB = [...where].find(([, i]) => i === 1)![0];
    expect((await op(options, ["inspect", "--workspace-id", onB])).code).toBe(0);
    // maxWorkspaces reached on A and C, B cordoned: no candidate, one line naming each host and why.
    const counts = [0, 1, 2].map(held);
    const full = poolOptions([{ maxWorkspaces: counts[0] }, { cordoned: true }, { maxWorkspaces: counts[2] }]);
    const none = await create(full, newId("full"));
    expect(none.code).toBe(6);
    expect(none.message).toMatch(
      /^No host of the pool can take the workspace: hosts\[0\] \S+: full \(\d+ of maxWorkspaces \d+\); hosts\[1\] \S+: cordoned; hosts\[2\] \S+: full /,
    );
    expect([0, 1, 2].map(held)).toEqual(counts);
  }, 300_000);

  it("skips a refusing host, fails its workspaces with a network error naming it, and reconciles it only once back", async () => {
    const options = poolOptions();
    await eps[2]!.refuse();
    try {
      const before = held(2);
      for (let n = 0; n < 2; n++) {
        const r = await create(options, newId("down"));
        expect(r.code, r.stderr).toBe(0);
      }
      expect(held(2)).toBe(before);
      // Remembered as down, so the next creates do not wait for it.
      const [c] = parseEntries({ connectTimeoutMs: 3000 }, [eps[2]!.entry()]);
      expect(recentlyDown(c!.id)).toMatch(/127\.0\.0\.1/);
      // status: one row per host, the refusing one unreachable; doctor fails naming it.
      const status = await runCli(["status", "--options", JSON.stringify(options), "--json", "true"], { timeoutMs: 60_000 });
      expect(status.code).toBe(5);
      const rows = status.stdout
        .toString("utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { host: string; reachable: boolean; load?: { workspaces: number } });
      expect(rows.map((r) => r.reachable)).toEqual([true, true, false]);
      expect(rows.map((r) => r.load?.workspaces)).toEqual([held(0), held(1), undefined]);
      expect(rows[2]!.host).toContain(`:${eps[2]!.port}`);
      const table = await runCli(["status", "--options", JSON.stringify(poolOptions([{}, { cordoned: true }, {}]))], { timeoutMs: 60_000 });
      const lines = table.stdout.toString("utf8").split("\n");
      expect(lines[0]).toMatch(/^HOST\s+REACHABLE\s+LOAD\/CPU\s+FREE DISK\s+MEMORY\s+WORKSPACES\s+EXECS\s+CORDONED$/);
      expect(lines[2]).toMatch(/ yes\s+\d+\.\d\d\s+.*\s+yes$/);
      const doctor = await runCli(["doctor", "--options", JSON.stringify(options)], { timeoutMs: 60_000 });
      expect(doctor.code).toBe(5);
      expect(doctor.stderr.toString()).toContain(`doctor: 1 host(s) of the pool failed: hosts[2] `);
      expect(doctor.stdout.toString("utf8").match(/^ok +host facts/gm)).toHaveLength(2);
      const onC = [...where].filter(([, i]) => i === 2).map(([id]) => id);
      const r = await op(options, ["inspect", "--workspace-id", onC[0]!]);
      expect(r.code).toBe(5);
      expect(r.message).toContain(`127.0.0.1:${eps[2]!.port}`);
      expect(r.stdout).not.toContain("missing");
      // The record lost too: still a network error naming it, never "missing".
      removePlacement(TEST_RUNTIME_INSTANCE_ID, onC[1]!);
      const lost = await op(options, ["inspect", "--workspace-id", onC[1]!]);
      expect(lost.code).toBe(5);
      expect(lost.message).toContain(`:${eps[2]!.port}`);
      // Reconcile: Paseo forgot one workspace on A and one on C.
      const orphanA = [...where].find(([, i]) => i === 0)![0];
      const keep = [...where.keys()].filter((id) => id !== orphanA && id !== onC[0]);
      const rec = await op(options, ["reconcile"], { workspaceIds: keep });
      expect(rec.code).toBe(5);
      expect(rec.stderr).toContain(`:${eps[2]!.port} not reconciled, nothing deleted there`);
      expect(holder(orphanA)).toEqual([]);
      expect(holder(onC[0]!)).toEqual([2]);
      where.delete(orphanA);
      await eps[2]!.restore();
      const again = await op(options, ["reconcile"], { workspaceIds: keep });
      expect(again.code, again.stderr).toBe(0);
      expect(holder(onC[0]!)).toEqual([]);
      where.delete(onC[0]!);
      const back = await op(options, ["inspect", "--workspace-id", onC[1]!]);
      expect(back.code, back.stderr).toBe(0);
    } finally {
      await eps[2]!.restore().catch(() => undefined);
    }
  }, 300_000);

  it("writes nothing of the pool's with a single host entry", async () => {
    const dir = brokerDir();
    const files = (): string[] =>
      dir && existsSync(join(dir, "pool")) ? (readdirSync(join(dir, "pool"), { recursive: true }) as string[]).sort() : [];
    const before = files();
    const single = { ...eps[0]!.entry(), connectTimeoutMs: 3000 } as Options;
    const id = newId("single");
    const r = await op(single, ["create", "--workspace-id", id], { input: dirInput(id, fixture.path) });
    expect(r.code, r.stderr).toBe(0);
    expect(progressLines(r.stderr).map((p) => p.phase)).not.toContain("placed");
    expect((await op(single, ["inspect", "--workspace-id", id])).code).toBe(0);
    expect((await op(single, ["destroy", "--workspace-id", id])).code).toBe(0);
    expect(files()).toEqual(before);
  }, 120_000);

  it("takes its hosts from hostsCommand, keeps a host that left the list reachable, and refuses a failing command", async () => {
    const list = join(base, "hosts.json");
    const script = join(base, "hosts.mjs");
    writeFileSync(script, `import { readFileSync } from "node:fs"; process.stdout.write(readFileSync(process.argv[2], "utf8"));\n`);
    const options = { connectTimeoutMs: 3000, hostsCommand: { argv: [process.execPath, script, list], cacheMs: 0 } } as Options;
    writeFileSync(list, JSON.stringify([eps[1]!.entry()]));
    const id = newId("cmd");
    expect((await create(options, id)).code).toBe(0);
    expect(where.get(id)).toBe(1);
    writeFileSync(list, JSON.stringify({ hosts: [eps[0]!.entry()] }));
    const next = newId("cmd");
    expect((await create(options, next)).code).toBe(0);
    expect(where.get(next)).toBe(0);
    expect((await op(options, ["inspect", "--workspace-id", id])).code).toBe(0);
    // Reconcile still visits the host that left the list (from its placement record).
    const rec = await op(options, ["reconcile"], { workspaceIds: [...where.keys()].filter((w) => w !== id) });
    expect(rec.code, rec.stderr).toBe(0);
    expect(holder(id)).toEqual([]);
    expect(readPlacement(TEST_RUNTIME_INSTANCE_ID, id)).toBeNull();
    where.delete(id);
    writeFileSync(list, "[]");
    const empty = await create(options, newId("cmd"));
    expect(empty.code).toBe(2);
    expect(empty.message).toContain("listed no host: refusing an empty pool");
    const failing = { hostsCommand: [process.execPath, "-e", "process.stderr.write('no fleet'); process.exit(3)"] } as Options;
    const failed = await create(failing, newId("cmd"));
    expect(failed.code).toBe(2);
    expect(failed.message).toContain("failed (exit 3): no fleet");
  }, 300_000);

  it("a hostsCommand pipeline is held to its time and output bounds, and none of it is left running", async () => {
    // In the command lines of the pipeline's processes only: sleep takes `25.<digits>` seconds.
    const mark = String(randomBytes(4).readUInt32BE());
    const leftovers = () =>
      readdirSync("/proc")
        .filter((n) => /^\d+$/.test(n))
        .filter((pid) => cmdline(pid).includes(mark)) as string[];
    const slow = {
      hostsCommand: { argv: ["sh", "-c", `sleep 25.${mark} | cat`], timeoutMs: 1000, cacheMs: 0 },
    } as Options;
    let t0 = Date.now();
    const late = await create(slow, newId("cmd"));
    expect({ code: late.code, message: late.message }).toEqual({
      code: 2,
      message: expect.stringContaining("hostsCommand sh did not finish within 1000 ms") as string,
    });
    expect(Date.now() - t0).toBeLessThan(15_000);
    const endless = { hostsCommand: { argv: ["sh", "-c", `yes ${mark} | cat`], timeoutMs: 60_000, cacheMs: 0 } } as Options;
    t0 = Date.now();
    const flood = await create(endless, newId("cmd"));
    expect({ code: flood.code, message: flood.message }).toEqual({
      code: 2,
      message: expect.stringContaining("hostsCommand sh printed more than 1048576 bytes") as string,
    });
    expect(Date.now() - t0).toBeLessThan(30_000);
    expect(leftovers()).toEqual([]);
  }, 120_000);
});
