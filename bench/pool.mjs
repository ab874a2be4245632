// The pool rows (docs/pool.md), per network path: a create with three hosts against the same create
// with one host entry (placement asks every host for its facts in parallel, so it may add one round
// trip), and exec / inspect of a pool workspace against a single-host entry's (the placement record
// sends them straight to their host: no round trip more). The three hosts are three proxies with
// this path's delay in front of the rig's sshd, each with its own root: three brokers, SSH
// connections and host daemons, as three machines have; the single-host entry is the first of them.
import { appendFileSync } from "node:fs";
import { startProxy } from "./proxy-process.mjs";
import { shutdownBrokers } from "./broker-shutdown.mjs";
import { interleaved, reason, unavailable } from "./sampling.mjs";
import { rigOptions } from "./rig.mjs";

const LABELS = {
  createSingle: "create, one-file workspace, one host entry",
  createPool: "create, one-file workspace, pool of three hosts",
  execSingle: "exec /bin/true, pipes, one host entry",
  execPool: "exec /bin/true, pipes, pool workspace",
  inspectSingle: "inspect, one host entry",
  inspectPool: "inspect, pool workspace",
};

export async function benchPool(ctx, net, { rootName, createInput, log }) {
  const { rt, rig, plan } = ctx;
  const proxies = [];
  const made = [];
  let n = 0;
  let single;
  let pool;
  const destroy = (id, options) => rt.op("destroy", { workspaceId: id, options }).catch((e) => log(`destroy ${id}: ${reason(e)}`));
  try {
    for (let i = 0; i < 3; i++) proxies.push(await startProxy(rig.port, net.delayMs, 30 * 60_000));
    const keys = rig.hostPublicKeys.map((k) => k.split(" ").slice(0, 2).join(" "));
    appendFileSync(ctx.knownHostsFile, proxies.flatMap((p) => keys.map((k) => `[127.0.0.1]:${p.port} ${k}\n`)).join(""));
    const entry = (i) => rigOptions(ctx, proxies[i].port, `${rootName}-pool-${i}`);
    single = entry(0);
    pool = { hosts: [0, 1, 2].map(entry) };
    /** A one-file workspace (one project: the hosts' caches are warm after the first round). */
    const create = async (options) => {
      const id = `bench-${net.key}-pool-${n++}`;
      const r = await rt.op("create", { workspaceId: id, options, extra: createInput(id, ctx.repos.tiny, "bench-pool") });
      made.push([id, options]);
      return r.ms;
    };
    log("pool: a workspace on a single host entry and one in the pool");
    const singleWs = `bench-${net.key}-pool-single`;
    const poolWs = `bench-${net.key}-pool-ws`;
    for (const [id, options] of [
      [singleWs, single],
      [poolWs, pool],
    ]) {
      await rt.op("create", { workspaceId: id, options, extra: createInput(id, ctx.repos.tiny, "bench-pool") });
      made.push([id, options]);
    }
    log("pool: interleaved rounds");
    const exec = (options, id) => async () => (await rt.exec(options, id, ["/bin/true"])).exited;
    const inspect = (options, id) => async () => (await rt.op("inspect", { workspaceId: id, options })).ms;
    const rows = await interleaved(
      {
        createSingle: { label: LABELS.createSingle, run: () => create(single) },
        createPool: { label: LABELS.createPool, run: () => create(pool) },
        execSingle: { label: LABELS.execSingle, run: exec(single, singleWs) },
        execPool: { label: LABELS.execPool, run: exec(pool, poolWs) },
        inspectSingle: { label: LABELS.inspectSingle, run: inspect(single, singleWs) },
        inspectPool: { label: LABELS.inspectPool, run: inspect(pool, poolWs) },
      },
      plan.rounds,
      1,
      log,
    );
    return rows;
  } catch (err) {
    return Object.fromEntries(Object.entries(LABELS).map(([k, label]) => [k, unavailable(label, err)]));
  } finally {
    for (const [id, options] of made) await destroy(id, options);
    // The pool's brokers retire their host daemons while the proxies still reach them (the path's
    // own broker goes too; the next operation starts another).
    for (const err of await shutdownBrokers(ctx.tmp)) log(`pool: broker shutdown: ${err}`);
    for (const p of proxies) await p.stop();
  }
}
