// A pool's memory and bounds against other runtime entries of the same Paseo home (issue 30): a
// reconcile touches only what its own entry created, a create retried after its placement record
// was lost goes back to the host that has the workspace, maxWorkspaces holds under concurrent
// creates, a squatted temporary directory does not switch the records off, records follow the
// entry's current options, and a large host list is asked a few hosts at a time.
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync, chownSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { readPlacement, removePlacement } from "../../src/workspace/pool/pool-state.js";
import { brokerDir } from "../../src/broker/common/broker-paths.js";
import { FANOUT } from "../../src/workspace/pool/pool.js";
import { sha256Hex } from "../../src/shared/sha256.js";
import { seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { runCli, TEST_RUNTIME_INSTANCE_ID } from "../support/run-cli.js";
import { dirInput, removeRoot } from "../support/workspace.js";
import { extraSshdSkipReason } from "../support/extra-sshd.js";
import { poolOp, startPoolEndpoint, type PoolEndpoint } from "../support/pool-endpoints.js";
import { longSuite, needs, unless } from "../support/needs.js";
import { usePrivateBrokerDir } from "../support/private-broker-dir.js";
import type { Options } from "../../src/contract/index.js";

const skip = extraSshdSkipReason();

const op = poolOp;

const newId = (label: string) => `entries-${label}-${randomBytes(4).toString("hex")}`;

describe("a pool among other runtime entries", unless(skip), () => {
  usePrivateBrokerDir("pool-entries");
  // Called after usePrivateBrokerDir: its afterAll runs after these cleanups.
  const fx = suite("all");
  let eps: PoolEndpoint[];
  let fixture: FixtureRepo;
  let base: string;

  const holder = (id: string): number[] => eps.flatMap((e, i) => (existsSync(workspaceLayout(e.root, id).dir) ? [i] : []));
  const pool = (entries: Array<Record<string, unknown>>): Options => ({ connectTimeoutMs: 3000, hosts: entries }) as Options;
  const single = (i: number): Options => ({ ...eps[i]!.entry(), connectTimeoutMs: 3000 }) as Options;
  const create = (options: Options, id: string, env?: NodeJS.ProcessEnv) =>
    op(options, ["create", "--workspace-id", id], { input: dirInput(id, fixture.path) }, env);
  const status = async (options: Options, id: string): Promise<string> => {
    const r = await op(options, ["inspect", "--workspace-id", id]);
    expect(r.code, r.stderr).toBe(0);
    return (JSON.parse(r.stdout) as { inspection: { status: string } }).inspection.status;
  };

  beforeAll(async () => {
    base = fx.tmp("paseo-pool-entries-");
    fixture = seedRepo(base);
    fx.push(() => Promise.all((eps ?? []).map((e) => e.stop())));
    eps = await Promise.all(["ea", "eb"].map((l) => startPoolEndpoint(l)));
  }, 60_000);

  it("a reconcile removes only what its own entry created: not another pool's, nor a single host's on a shared host", async () => {
    // Same Paseo home (one runtimeInstanceId): pool P1 on host 0, pool P2 on host 1, a single-host entry on host 0.
    const p1 = pool([eps[0]!.entry()]);
    const p2 = pool([eps[1]!.entry()]);
    const s = single(0);
    const [w1, w2, w3] = [newId("p1"), newId("p2"), newId("single")];
    for (const [options, id] of [
      [p1, w1],
      [p2, w2],
      [s, w3],
    ] as const)
      expect((await create(options, id)).code).toBe(0);
    expect([w1, w2, w3].map(holder)).toEqual([[0], [1], [0]]);
    // Paseo reconciles P1 with P1's ids: P2's host (known from P2's record) and the single host's
    // workspace beside P1's are none of its business.
    const r1 = await op(p1, ["--verbose", "reconcile"], { workspaceIds: [w1] });
    expect(r1.code, r1.stderr).toBe(0);
    expect(r1.stderr).not.toContain("removed orphaned workspace");
    expect(await status(p2, w2)).toBe("ready");
    expect(await status(s, w3)).toBe("ready");
    // The single host's reconcile leaves the pool's workspace on its host alone too.
    const r2 = await op(s, ["reconcile"], { workspaceIds: [w3] });
    expect(r2.code, r2.stderr).toBe(0);
    expect(holder(w1)).toEqual([0]);
    // Each entry still removes its own orphans.
    for (const options of [p1, p2, s]) expect((await op(options, ["reconcile"], { workspaceIds: [] })).code).toBe(0);
    expect([w1, w2, w3].map(holder)).toEqual([[], [], []]);
  }, 300_000);

  it("a create retried after its placement record was lost goes back to the host that has the workspace", async () => {
    const id = newId("retry");
    const first = await create(pool([eps[0]!.entry(), eps[1]!.entry({ cordoned: true })]), id);
    expect(first.code, first.stderr).toBe(0);
    expect(holder(id)).toEqual([0]);
    // The record is gone (a reboot cleared it, or the runtime was killed before writing it), and
    // the host that has the workspace is cordoned meanwhile: a fresh placement would go to host 1.
    removePlacement(TEST_RUNTIME_INSTANCE_ID, id);
    const retried = await create(pool([eps[0]!.entry({ cordoned: true }), eps[1]!.entry()]), id);
    expect(retried.code, retried.stderr).toBe(0);
    expect(holder(id)).toEqual([0]);
    expect((JSON.parse(retried.stdout) as { materializedFreshContent: boolean }).materializedFreshContent).toBe(false);
    expect(readPlacement(TEST_RUNTIME_INSTANCE_ID, id)?.label).toContain(`:${eps[0]!.port}`);
    expect((await op(pool([eps[0]!.entry(), eps[1]!.entry()]), ["destroy", "--workspace-id", id])).code).toBe(0);
  }, 300_000);

  it("concurrent creates do not exceed maxWorkspaces: creates in flight count towards it", async () => {
    const held = (): number => {
      const dir = join(eps[1]!.root, "workspaces");
      return existsSync(dir) ? readdirSync(dir).filter((n) => n.startsWith("paseo-ws-")).length : 0;
    };
    const before = held();
    const options = pool([eps[0]!.entry({ cordoned: true }), eps[1]!.entry({ maxWorkspaces: before + 1 })]);
    const ids = [0, 1, 2, 3].map(() => newId("max"));
    const results = await Promise.all(ids.map((id) => create(options, id)));
    const made = ids.filter((_, i) => results[i]!.code === 0);
    expect(made, results.map((r) => r.message).join("\n")).toHaveLength(1);
    expect(held()).toBe(before + 1);
    for (const r of results.filter((r) => r.code !== 0)) {
      expect(r.code).toBe(6);
      expect(r.message).toMatch(
        /^No host of the pool can take the workspace: hosts\[0\] \S+: cordoned; hosts\[1\] \S+: full \(\d+ of maxWorkspaces \d+/,
      );
    }
    expect((await op(options, ["destroy", "--workspace-id", made[0]!])).code).toBe(0);
  }, 300_000);

  it(
    "keeps its records in the user's state directory when another user squatted every broker directory name in a shared TMPDIR",
    { ...unless(needs.root("gives the squatted directories to another user (chown)")), timeout: 300_000 },
    async () => {
      const shared = join(base, "shared-tmp");
      const home = join(base, "home");
      mkdirSync(shared, { mode: 0o1777 });
      mkdirSync(home, { mode: 0o700 });
      for (const name of ["", ".1", ".2", ".3", ".4"].map((n) => `paseo-ssh-0${n}`)) {
        mkdirSync(join(shared, name), { mode: 0o700 });
        chownSync(join(shared, name), 65534, 65534);
      }
      const { XDG_RUNTIME_DIR: _, XDG_STATE_HOME: __, ...rest } = process.env;
      const env = { ...rest, TMPDIR: shared, HOME: home };
      const options = pool([eps[0]!.entry(), eps[1]!.entry()]);
      const id = newId("squat");
      const r = await create(options, id, env);
      expect(r.code, r.stderr).toBe(0);
      // The placement record is there (before: none anywhere, so nothing was remembered).
      const records = join(home, ".local", "state", "paseo-ssh", "pool", "placements");
      expect(existsSync(records) ? readdirSync(records, { recursive: true }).filter((n) => String(n).endsWith(".json")) : []).toHaveLength(
        1,
      );
      expect((await op(options, ["destroy", "--workspace-id", id], {}, env)).code).toBe(0);
      // The state directory squatted too: a clear line, not a pool without memory.
      const squatted = join(base, "squatted-home");
      mkdirSync(join(squatted, ".local", "state", "paseo-ssh"), { recursive: true, mode: 0o700 });
      chownSync(join(squatted, ".local", "state", "paseo-ssh"), 65534, 65534);
      const refused = await create(options, newId("squat"), { ...env, HOME: squatted });
      expect(refused.code).toBe(2);
      expect(refused.message).toMatch(
        /^A pool needs a private directory for its placement records: .*set XDG_RUNTIME_DIR or XDG_STATE_HOME/,
      );
    },
  );

  it("a placement record names its host entry: the entry's current options reach the workspace, a stale recorded key breaks nothing", async () => {
    const id = newId("opts");
    expect((await create(pool([eps[0]!.entry(), eps[1]!.entry({ cordoned: true })]), id)).code).toBe(0);
    expect(holder(id)).toEqual([0]);
    // An earlier version's record with a key the schema no longer has.
    const file = join(
      brokerDir()!,
      "pool",
      "placements",
      sha256Hex(TEST_RUNTIME_INSTANCE_ID).slice(0, 16),
      `${sha256Hex(id).slice(0, 32)}.json`,
    );
    const record = JSON.parse(readFileSync(file, "utf8")) as Record<string, Record<string, unknown>>;
    for (const k of ["entry", "raw"]) if (record[k]) record[k] = { ...record[k], removedOption: 1 };
    writeFileSync(file, JSON.stringify(record));
    expect(await status(pool([eps[0]!.entry(), eps[1]!.entry()]), id)).toBe("ready");
    // The host left the list: the recorded entry still reaches it, its stale key dropped.
    expect(await status(pool([eps[1]!.entry()]), id)).toBe("ready");
    // knownHostsFile moved: the old file no longer trusts the host, the entry names the new one.
    // In-process (no broker), so the host key is checked by this very operation.
    const old = eps[0]!.entry().knownHostsFile as string;
    const saved = readFileSync(old);
    const moved = join(base, "known_hosts.moved");
    writeFileSync(moved, saved);
    writeFileSync(old, "");
    try {
      const r = await op(
        pool([eps[0]!.entry({ knownHostsFile: moved }), eps[1]!.entry()]),
        ["inspect", "--workspace-id", id],
        {},
        {
          ...process.env,
          PASEO_SSH_NO_BROKER: "1",
        },
      );
      expect(r.code, r.stderr).toBe(0);
    } finally {
      writeFileSync(old, saved);
    }
    expect((await op(pool([eps[0]!.entry(), eps[1]!.entry()]), ["destroy", "--workspace-id", id])).code).toBe(0);
  }, 300_000);

  it(
    "a large host list is asked FANOUT hosts at a time and leaves no broker behind for hosts it only looked at",
    { ...longSuite("a host list of many endpoints"), timeout: 300_000 },
    async () => {
      // What the fan-out allows on one endpoint: FANOUT workers, each holding one in-process
      // connection at a time, plus the one each worker just closed. withHost closes a connection
      // before its worker takes the next host, but nothing waits for the teardown to reach the relay
      // (SshHost.close() only writes the FIN); a worker's following connection needs a whole SSH
      // handshake through that relay before it is done, so at most one closed connection per worker
      // can still be counted. 3 x FANOUT entries, so that asking them all at once (the code before
      // the bound: 16 brokers connecting at once for 16 hosts) exceeds it.
      const hosts = 3 * FANOUT;
      const bound = 2 * FANOUT;
      // Entries on one endpoint, each its own root (distinct host identities), none used before.
      const roots = Array.from({ length: hosts }, (_, i) => `${eps[1]!.root}-many${i}`);
      // Each host's first answer installs the agent into its new root and starts its daemon: on a
      // loaded machine that can take longer than the usual 3 s + 5 s, and a host that answers late
      // is abandoned with its connection still open, beyond the bound (and reported unreachable).
      const options = { ...pool(roots.map((root) => eps[1]!.entry({ root }))), connectTimeoutMs: 20_000 } as Options;
      const sockets = (): number => readdirSync(brokerDir()!).filter((n) => n.endsWith(".sock")).length;
      try {
        const before = sockets();
        eps[1]!.takePeak();
        // Connections this status does not make: brokers of earlier tests' entries on this endpoint.
        const others = eps[1]!.carried();
        const r = await runCli(["status", "--options", JSON.stringify(options), "--json", "true"], { timeoutMs: 180_000 });
        expect(r.code, r.stderr.toString()).toBe(0);
        expect(r.stdout.toString("utf8").trim().split("\n")).toHaveLength(hosts);
        // Every host answered in time (code 0): a late one's connection would outlive its worker's turn.
        expect(eps[1]!.takePeak()).toBeLessThanOrEqual(others + bound);
        expect(sockets()).toBe(before);
        // A create places its workspace on one of them (that one gets a broker: it is used). The
        // broker connects once placement's fan-out is over: its connection and the last ones
        // placement closed stay within the same bound.
        const id = newId("many");
        expect((await create(options, id)).code).toBe(0);
        expect(eps[1]!.takePeak()).toBeLessThanOrEqual(others + bound);
        expect((await op(options, ["destroy", "--workspace-id", id])).code).toBe(0);
      } finally {
        for (const root of roots) removeRoot(root);
      }
    },
  );
});
