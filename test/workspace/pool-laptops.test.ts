// Two Paseo daemons ("laptops": their own runtimeInstanceId, HOME, XDG_RUNTIME_DIR and TMPDIR, so
// their own brokers and placement records) sharing one pool of three hosts. Nothing central: the
// second laptop's creates see the first's workspaces through the hosts' facts and go to the other
// hosts, each laptop's operations reach its own workspaces, and neither can use the other's.
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { lifecycleRequest, runCli, TEST_RUNTIME_INSTANCE_ID } from "../support/run-cli.js";
import { dirInput, progressLines } from "../support/workspace.js";
import { extraSshdSkipReason } from "../support/extra-sshd.js";
import { startPoolEndpoint, type PoolEndpoint } from "../support/pool-endpoints.js";
import { unless } from "../support/needs.js";
import type { Options } from "../../src/contract/index.js";

const skip = extraSshdSkipReason();

interface Laptop {
  name: string;
  runtimeInstanceId: string;
  env: NodeJS.ProcessEnv;
  /** Its private broker directory (XDG_RUNTIME_DIR/paseo-ssh). */
  brokerDir: string;
}

function newLaptop(base: string, name: string, runtimeInstanceId: string): Laptop {
  const home = join(base, name);
  const dirs = { HOME: join(home, "home"), XDG_RUNTIME_DIR: join(home, "run"), TMPDIR: join(home, "tmp") };
  for (const d of Object.values(dirs)) mkdirSync(d, { recursive: true, mode: 0o700 });
  return {
    name,
    runtimeInstanceId,
    env: { ...process.env, ...dirs, PASEO_SSH_PROGRESS: "1" },
    brokerDir: join(dirs.XDG_RUNTIME_DIR, "paseo-ssh"),
  };
}

/** Placement records a laptop keeps (one file per workspace). */
function records(l: Laptop): number {
  const dir = join(l.brokerDir, "pool", "placements");
  return existsSync(dir) ? readdirSync(dir, { recursive: true }).filter((n) => String(n).endsWith(".json")).length : 0;
}

describe("two Paseo daemons sharing one pool", unless(skip), () => {
  const s = suite("all");
  let eps: PoolEndpoint[];
  let fixture: FixtureRepo;
  let base: string;
  let laptops: [Laptop, Laptop];
  /** Workspace id → [laptop index, endpoint index]. */
  const where = new Map<string, [number, number]>();

  const poolOptions = (only?: number): Options =>
    ({ connectTimeoutMs: 3000, hosts: eps.map((e, i) => e.entry(only !== undefined && i !== only ? { cordoned: true } : {})) }) as Options;
  const holder = (id: string): number[] => eps.flatMap((e, i) => (existsSync(workspaceLayout(e.root, id).dir) ? [i] : []));

  async function op(l: Laptop, options: Options, args: string[], extra: Record<string, unknown> = {}) {
    const r = await runCli(args, {
      stdin: lifecycleRequest(options, { runtimeInstanceId: l.runtimeInstanceId, ...extra }),
      env: l.env,
      timeoutMs: 120_000,
    });
    const lines = r.stderr.trim().split("\n");
    return { code: r.code, stdout: r.stdout.toString("utf8"), stderr: r.stderr, message: lines[lines.length - 1] ?? "" };
  }

  async function create(li: number, options: Options): Promise<string> {
    const id = `laptop${li}-${randomBytes(4).toString("hex")}`;
    const r = await op(laptops[li]!, options, ["create", "--workspace-id", id], { input: dirInput(id, fixture.path) });
    expect(r.code, r.stderr).toBe(0);
    const on = holder(id);
    expect(on).toHaveLength(1);
    const placed = progressLines(r.stderr).find((p) => p.phase === "placed") as { host?: string } | undefined;
    expect(placed?.host).toContain(`:${eps[on[0]!]!.port}`);
    where.set(id, [li, on[0]!]);
    return id;
  }

  beforeAll(async () => {
    base = s.tmp("paseo-pool-laptops-");
    fixture = seedRepo(base);
    laptops = [newLaptop(base, "one", TEST_RUNTIME_INSTANCE_ID), newLaptop(base, "two", "7".repeat(64))];
    s.push(() => Promise.all((eps ?? []).map((e) => e.stop())));
    eps = await Promise.all(["la", "lb", "lc"].map((l) => startPoolEndpoint(l)));
  }, 60_000);

  it("the second laptop's creates go to the hosts the first left empty: it sees the first's workspaces in the hosts' facts", async () => {
    // Laptop one puts three workspaces on host 0 (the others cordoned in its entry only).
    for (let n = 0; n < 3; n++) await create(0, poolOptions(0));
    // Laptop two has no record of them and no reservation of the other's: only the hosts know.
    expect(records(laptops[1])).toBe(0);
    const second: string[] = [];
    for (let n = 0; n < 4; n++) second.push(await create(1, poolOptions()));
    const hosts = second.map((id) => where.get(id)![1]);
    expect(hosts.filter((h) => h === 0)).toEqual([]);
    expect(hosts.filter((h) => h === 1)).toHaveLength(2);
    expect(hosts.filter((h) => h === 2)).toHaveLength(2);
    expect(records(laptops[0])).toBe(3);
    expect(records(laptops[1])).toBe(4);
    // Each laptop has brokers of its own (its own sockets): nothing is shared on the Paseo side.
    for (const l of laptops) expect(readdirSync(l.brokerDir).filter((n) => n.endsWith(".sock")).length).toBeGreaterThan(0);
  }, 300_000);

  it("each laptop's operations reach its own workspaces, on their own hosts; neither can use the other's", async () => {
    const options = poolOptions();
    for (const [id, [li, ei]] of where) {
      const r = await op(laptops[li]!, options, ["inspect", "--workspace-id", id]);
      expect(r.code, r.stderr).toBe(0);
      const { inspection } = JSON.parse(r.stdout) as { inspection: { status: string; placement: { cwd: string } } };
      expect(inspection.status).toBe("ready");
      expect(inspection.placement.cwd.startsWith(eps[ei]!.root)).toBe(true);
    }
    // Laptop two asking for laptop one's workspace: found on its host (no record), refused as not its own.
    const [foreign] = [...where].find(([, [li]]) => li === 0)!;
    const refused = await op(laptops[1], options, ["inspect", "--workspace-id", foreign]);
    expect(refused.code, refused.stderr).toBe(7);
    const destroyRefused = await op(laptops[1], options, ["destroy", "--workspace-id", foreign]);
    expect(destroyRefused.code, destroyRefused.stderr).toBe(7);
    expect(holder(foreign)).toEqual([where.get(foreign)![1]]);
    // Laptop one destroys its workspaces; laptop two's next create sees host 0 empty again.
    for (const [id, [li]] of [...where].filter(([, [li]]) => li === 0)) {
      const r = await op(laptops[li]!, options, ["destroy", "--workspace-id", id]);
      expect(r.code, r.stderr).toBe(0);
      expect(holder(id)).toEqual([]);
      where.delete(id);
    }
    const next = await create(1, options);
    expect(where.get(next)![1]).toBe(0);
  }, 300_000);
});
