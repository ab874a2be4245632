// A pool of hosts behind one runtime entry: the hosts it lists now, asking all of them something in
// parallel (bounded by connectTimeoutMs), placing a new workspace on the best of them, and finding
// the one host an existing workspace lives on. The hosts' own daemons are the source of truth;
// pool-state.ts only remembers answers so the next operation asks less.
import type { RemoteHost } from "../../transport/host.js";
import { join } from "node:path";
import { withHost } from "../../broker/client/open-host.js";
import { withLock } from "../../broker/common/lock.js";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import type { AgentAnswer, HostLoad, OneShotOp, OpRequest, PoolLoadRequest } from "../../shared/agent-api.js";
import { parseEntries, parsePoolSpec, type Located, type PoolEntry } from "./pool-options.js";
import { loadHostList } from "./hosts-command.js";
import { namesItsHost } from "./detect.js";
import { sha256Hex } from "../../shared/sha256.js";
import { markDown, markUp, poolStateDir, recentlyDown, reservations, reserve, writePlacement, type PlacementRecord } from "./pool-state.js";

/** Beyond connectTimeoutMs, what one host's answer may take (the agent's own work, a daemon start). */
const ANSWER_MARGIN_MS = 5_000;
/**
 * Hosts asked at once by a fan-out (placement facts, look-ups, status, reconcile): each one costs an
 * SSH connection and, through a broker, a process; a pool of 200 hosts asked all at once ran 200.
 */
export const FANOUT = 8;

export interface Pool {
  entries: PoolEntry[];
  /**
   * This runtime entry's identity (docs/pool.md "Reconcile"): its workspaces' manifests and
   * placement records carry it, and its reconcile removes nothing created under another.
   */
  scope: string;
  /** The top-level keys: every entry's defaults (also under a recorded entry that left the list). */
  defaults: Record<string, unknown>;
}

/** Parses a pool options object (running hostsCommand, or reading its cached answer, if it has one). */
export async function loadPool(raw: Record<string, unknown>): Promise<Pool> {
  const spec = parsePoolSpec(raw);
  if (spec.hosts) {
    const entries = parseEntries(spec.defaults, spec.hosts);
    // The set of hosts (identities, not their order or connection options): reordering or a new
    // key file keeps the entry's workspaces its own.
    return { entries, scope: poolScope({ hosts: entries.map((e) => e.id).sort() }), defaults: spec.defaults };
  }
  const hosts = await loadHostList(spec.hostsCommand!);
  // The command, not its answer: the fleet it prints may change, the entry stays the same.
  return {
    entries: parseEntries(spec.defaults, hosts, "hostsCommand output"),
    scope: poolScope({ hostsCommand: spec.hostsCommand!.argv }),
    defaults: spec.defaults,
  };
}

function poolScope(identity: unknown): string {
  return sha256Hex(JSON.stringify(identity)).slice(0, 32);
}

export type HostAnswer<T> = { entry: PoolEntry; ok: true; value: T } | { entry: PoolEntry; ok: false; error: RuntimeError };

function asRuntimeError(err: unknown): RuntimeError {
  if (err instanceof RuntimeError) return err;
  return new RuntimeError("network", oneLine(err instanceof Error ? err.message : String(err)));
}

/**
 * Runs `fn` against every entry, FANOUT at a time, each bounded by its connectTimeoutMs plus a
 * margin (from its own start); a host that cannot be reached is remembered as down (and one that
 * answers, as up again). `startBroker` (for callOn): false beyond FANOUT entries, so that hosts
 * only visited for a look-up are asked in-process unless their broker already runs.
 */
export async function acrossHosts<T>(
  entries: PoolEntry[],
  fn: (entry: PoolEntry, startBroker: boolean) => Promise<T>,
  boundMs: (entry: PoolEntry) => number = (e) => e.options.connectTimeoutMs + ANSWER_MARGIN_MS,
): Promise<HostAnswer<T>[]> {
  const startBroker = entries.length <= FANOUT;
  const ask = async (entry: PoolEntry): Promise<HostAnswer<T>> => {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(namesItsHost(new RuntimeError("network", `${entry.label} did not answer within ${boundMs(entry)} ms`))),
        boundMs(entry),
      );
      timer.unref();
    });
    try {
      const value = await Promise.race([fn(entry, startBroker), bound]);
      markUp(entry.id);
      return { entry, ok: true, value };
    } catch (err) {
      const error = asRuntimeError(err);
      if (error.errorClass === "network") markDown(entry.id, oneLine(error.message));
      return { entry, ok: false, error };
    } finally {
      clearTimeout(timer);
    }
  };
  const answers: HostAnswer<T>[] = new Array(entries.length);
  let next = 0;
  const worker = async () => {
    while (next < entries.length) {
      const i = next++;
      answers[i] = await ask(entries[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(FANOUT, entries.length) }, worker));
  return answers;
}

/** One agent call on one entry's host. */
export function callOn<Op extends OneShotOp>(
  entry: PoolEntry,
  op: Op,
  fields: OpRequest<Op>,
  timeoutMs?: number,
  startBroker = true,
): Promise<AgentAnswer<Op>> {
  return onEntry(entry, (host) => host.call(op, fields, timeoutMs), startBroker);
}

/** Runs `fn` on the entry's host (failing fast while its link is down), then closes it. */
export function onEntry<T>(entry: PoolEntry, fn: (host: RemoteHost) => Promise<T>, startBroker = true): Promise<T> {
  return withHost(entry.options, fn, { failFast: true }, startBroker);
}

/**
 * Every entry's live facts, FANOUT hosts at a time; `skipDown`: hosts found down within the backoff are not
 * asked. `ask` adds fields of the request per host (a workspace to look for, creates in flight).
 */
export async function hostLoads(
  pool: Pick<Pool, "entries">,
  projectKey: string | null,
  skipDown: boolean,
  ask: (entry: PoolEntry) => Omit<PoolLoadRequest, "projectKey"> = () => ({}),
): Promise<Array<HostAnswer<HostLoad> | { entry: PoolEntry; ok: false; down: string }>> {
  const asked = pool.entries.filter((e) => !(skipDown && recentlyDown(e.id)));
  const answers = await acrossHosts(asked, (e, start) => callOn(e, "pool.load", { projectKey, ...ask(e) }, undefined, start));
  return pool.entries.map(
    (e) => answers.find((a) => a.entry === e) ?? { entry: e, ok: false as const, down: recentlyDown(e.id) ?? "unreachable" },
  );
}

/**
 * The placement score, lower is better (docs/pool.md):
 *   workspaces held + creates in flight here + liveExecs/2 + 4 x loadPerCpu
 *   + 4 x (1 - memAvailable/1 GiB) when under 1 GiB free, - 0.5 when the project's cache is warm.
 * One workspace counts as one unit, so hosts under equal load fill evenly; in-flight creates
 * (pool-state.ts reservations) count as workspaces, so concurrent creates spread.
 */
export function placementScore(load: HostLoad, inflight: number): number {
  const GiB = 1024 ** 3;
  const memory = load.memAvailableBytes < GiB ? 4 * (1 - load.memAvailableBytes / GiB) : 0;
  return load.workspaces + inflight + load.liveExecs / 2 + 4 * load.loadPerCpu + memory - (load.warmCache ? 0.5 : 0);
}

export interface Placement {
  entry: PoolEntry;
  score: number;
  /** The host already holds this workspace (a create retried after its record was lost): no new placement. */
  existing: boolean;
  /** Removes this create's reservation (call once it ended, either way). */
  release(): void;
}

/**
 * Chooses the host for a new workspace: asks every candidate (FANOUT at a time), skips the cordoned, the
 * full (maxWorkspaces), those without room (`needBytes`) and the unreachable, and takes the lowest
 * score. No candidate: one line naming each host and why. Called without a placement record of the
 * workspace, so the same round trip asks every host, cordoned ones too, whether it already holds
 * `lookFor`: a create retried after its record was lost goes back there instead of making a
 * second, empty workspace elsewhere.
 */
export async function placeWorkspace(
  pool: Pool,
  projectKey: string | null,
  needBytes: (load: HostLoad) => Promise<number>,
  lookFor: { workspaceId: string; owner: string },
): Promise<Placement> {
  // Creates under way (reservations): each host says which of them already claimed a directory
  // there, i.e. are in its `workspaces` already; the others count on top of it.
  const pending = reservations();
  const loads = await hostLoads(pool, projectKey, true, (e) => ({
    holds: lookFor,
    ...(pending.has(e.id) ? { inflight: pending.get(e.id)! } : {}),
  }));
  const holder = loads.find((a) => a.ok && a.value.holds === true);
  if (holder) return { entry: holder.entry, score: 0, existing: true, release: () => {} };
  const reasons = new Map<PoolEntry, string>();
  for (const e of pool.entries) if (e.cordoned) reasons.set(e, "cordoned");
  const fits: Array<{ entry: PoolEntry; load: HostLoad }> = [];
  for (const a of loads) {
    if (a.entry.cordoned) continue;
    if (!a.ok) {
      reasons.set(a.entry, "error" in a ? oneLine(a.error.message) : `down (${a.down}; not asked again for a while)`);
    } else {
      const need = await needBytes(a.value);
      if (a.value.freeBytes !== null && a.value.freeBytes < need)
        reasons.set(a.entry, `no room (${a.value.freeBytes} bytes free, ${need} needed)`);
      else fits.push({ entry: a.entry, load: a.value });
    }
  }
  // Under the lock, with the reservations as they are now: full counts the creates in flight too,
  // so concurrent creates cannot together exceed maxWorkspaces.
  const choose = (): Placement | null => {
    const inflight = reservations();
    let best: { entry: PoolEntry; score: number } | null = null;
    for (const f of fits) {
      const claimed = new Set(f.load.claimed ?? []);
      const coming = (inflight.get(f.entry.id) ?? []).filter((id) => !claimed.has(id)).length;
      const max = f.entry.maxWorkspaces;
      if (max !== null && f.load.workspaces + coming >= max) {
        const under = coming > 0 ? `, ${coming} being created` : "";
        reasons.set(f.entry, `full (${f.load.workspaces} of maxWorkspaces ${max}${under})`);
        continue;
      }
      const score = placementScore(f.load, coming);
      if (!best || score < best.score) best = { entry: f.entry, score };
    }
    return best && { ...best, existing: false, release: reserve(best.entry.id, lookFor.workspaceId) };
  };
  const dir = poolStateDir();
  // Choosing and reserving under one lock: two creates that asked at the same moment still differ.
  const chosen = await withLock(join(dir, "place.lock"), async () => choose());
  if (chosen) return chosen;
  const why = pool.entries.map((e) => `${e.label}: ${reasons.get(e) ?? "not a candidate"}`).join("; ");
  // Only hosts that could not be asked leave a chance that retrying helps: that is a network failure.
  const anyDown = loads.some((a) => !a.ok && !a.entry.cordoned);
  throw new RuntimeError(anyDown ? "network" : "remote-dependency", `No host of the pool can take the workspace: ${why}`);
}

export function recordFor(entry: PoolEntry, workspaceId: string, scope: string): PlacementRecord {
  return { workspaceId, hostId: entry.id, label: entry.label, entry: entry.own, scope };
}

export function recordPlacement(owner: string, entry: PoolEntry, workspaceId: string, scope: string): void {
  writePlacement(owner, recordFor(entry, workspaceId, scope));
}

/**
 * Finds a workspace whose placement record is lost by asking every host of the pool (FANOUT at a time)
 * (and records the answer). Never "missing" while a host that may hold it cannot be asked: that is
 * a network error naming those hosts.
 */
export async function findWorkspace(raw: Record<string, unknown>, owner: string, workspaceId: string): Promise<Located> {
  const pool = await loadPool(raw);
  const answers = await acrossHosts(pool.entries, (e, start) => callOn(e, "workspace.inspect", { workspaceId, owner }, undefined, start));
  const holder = answers.find((a) => (a.ok ? a.value.status !== "missing" : a.error.errorClass === "ownership"));
  if (holder) {
    recordPlacement(owner, holder.entry, workspaceId, pool.scope);
    return { options: holder.entry.options, label: holder.entry.label };
  }
  const unreachable = answers.filter((a) => !a.ok);
  if (unreachable.length > 0) {
    const named = unreachable.map((a) => `${a.entry.label} (${oneLine((a as { error: RuntimeError }).error.message)})`).join("; ");
    throw new RuntimeError("network", `Workspace ${JSON.stringify(workspaceId)} is on no reachable host of the pool; cannot ask ${named}`);
  }
  // Every host answered that it has no such workspace: the first host answers for it (missing).
  return { options: pool.entries[0]!.options, label: pool.entries[0]!.label };
}
