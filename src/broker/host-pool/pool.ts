// A pool of hosts behind one runtime entry: the hosts it lists now, asking all of them something in
// parallel (bounded by connectTimeoutMs), placing a new workspace on the best of them, and finding
// the one host an existing workspace lives on. The hosts' own daemons are the source of truth;
// state.ts only remembers answers so the next operation asks less.
import { join } from "node:path";
import { withHost } from "../open-host.js";
import { withLock } from "../lock.js";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import type { AgentAnswer, HostLoad, OneShotOp, OpRequest } from "../../shared/agent-api.js";
import { parseEntries, parsePoolSpec, type Located, type PoolEntry } from "./options.js";
import { loadHostList } from "./hosts-command.js";
import { namesItsHost } from "./detect.js";
import { markDown, markUp, poolStateDir, recentlyDown, reservations, reserve, writePlacement, type PlacementRecord } from "./state.js";

/** Beyond connectTimeoutMs, what one host's answer may take (the agent's own work, a daemon start). */
const ANSWER_MARGIN_MS = 5_000;

export interface Pool {
  entries: PoolEntry[];
}

/** Parses a pool options object (running hostsCommand, or reading its cached answer, if it has one). */
export async function loadPool(raw: Record<string, unknown>): Promise<Pool> {
  const spec = parsePoolSpec(raw);
  if (spec.hosts) return { entries: parseEntries(spec.defaults, spec.hosts) };
  const hosts = await loadHostList(spec.hostsCommand!);
  return { entries: parseEntries(spec.defaults, hosts, "hostsCommand output") };
}

export type HostAnswer<T> = { entry: PoolEntry; ok: true; value: T } | { entry: PoolEntry; ok: false; error: RuntimeError };

function asRuntimeError(err: unknown): RuntimeError {
  if (err instanceof RuntimeError) return err;
  return new RuntimeError("network", oneLine(err instanceof Error ? err.message : String(err)));
}

/**
 * Runs `fn` against every entry at once, each bounded by its connectTimeoutMs plus a margin; a host
 * that cannot be reached is remembered as down (and one that answers, as up again).
 */
export function acrossHosts<T>(
  entries: PoolEntry[],
  fn: (entry: PoolEntry) => Promise<T>,
  boundMs: (entry: PoolEntry) => number = (e) => e.options.connectTimeoutMs + ANSWER_MARGIN_MS,
): Promise<HostAnswer<T>[]> {
  return Promise.all(
    entries.map(async (entry): Promise<HostAnswer<T>> => {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(namesItsHost(new RuntimeError("network", `${entry.label} did not answer within ${boundMs(entry)} ms`))),
          boundMs(entry),
        );
        timer.unref();
      });
      try {
        const value = await Promise.race([fn(entry), bound]);
        markUp(entry.id);
        return { entry, ok: true, value };
      } catch (err) {
        const error = asRuntimeError(err);
        if (error.errorClass === "network") markDown(entry.id, oneLine(error.message));
        return { entry, ok: false, error };
      } finally {
        clearTimeout(timer);
      }
    }),
  );
}

/** One agent call on one entry's host. */
export function callOn<Op extends OneShotOp>(
  entry: PoolEntry,
  op: Op,
  fields: OpRequest<Op>,
  timeoutMs?: number,
): Promise<AgentAnswer<Op>> {
  return withHost(entry.options, (host) => host.call(op, fields, timeoutMs), { failFast: true });
}

/** Every entry's live facts, in parallel; `skipDown`: hosts found down within the backoff are not asked. */
export async function hostLoads(
  pool: Pool,
  projectKey: string | null,
  skipDown: boolean,
): Promise<Array<HostAnswer<HostLoad> | { entry: PoolEntry; ok: false; down: string }>> {
  const asked = pool.entries.filter((e) => !(skipDown && recentlyDown(e.id)));
  const answers = await acrossHosts(asked, (e) => callOn(e, "pool.load", { projectKey }));
  return pool.entries.map(
    (e) => answers.find((a) => a.entry === e) ?? { entry: e, ok: false as const, down: recentlyDown(e.id) ?? "unreachable" },
  );
}

/**
 * The placement score, lower is better (docs/pool.md):
 *   workspaces held + creates in flight here + liveExecs/2 + 4 x loadPerCpu
 *   + 4 x (1 - memAvailable/1 GiB) when under 1 GiB free, - 0.5 when the project's cache is warm.
 * One workspace counts as one unit, so hosts under equal load fill evenly; in-flight creates
 * (state.ts reservations) count as workspaces, so concurrent creates spread.
 */
export function placementScore(load: HostLoad, inflight: number): number {
  const GiB = 1024 ** 3;
  const memory = load.memAvailableBytes < GiB ? 4 * (1 - load.memAvailableBytes / GiB) : 0;
  return load.workspaces + inflight + load.liveExecs / 2 + 4 * load.loadPerCpu + memory - (load.warmCache ? 0.5 : 0);
}

export interface Placement {
  entry: PoolEntry;
  score: number;
  /** Removes this create's reservation (call once it ended, either way). */
  release(): void;
}

/**
 * Chooses the host for a new workspace: asks every candidate in parallel, skips the cordoned, the
 * full (maxWorkspaces), those without room (`needBytes`) and the unreachable, and takes the lowest
 * score. No candidate: one line naming each host and why.
 */
export async function placeWorkspace(
  pool: Pool,
  projectKey: string | null,
  needBytes: (load: HostLoad) => Promise<number>,
): Promise<Placement> {
  const candidates = pool.entries.filter((e) => !e.cordoned);
  const loads = await hostLoads({ entries: candidates }, projectKey, true);
  const reasons = new Map<PoolEntry, string>();
  for (const e of pool.entries) if (e.cordoned) reasons.set(e, "cordoned");
  const fits: Array<{ entry: PoolEntry; load: HostLoad }> = [];
  for (const a of loads) {
    if (!a.ok) {
      reasons.set(a.entry, "error" in a ? oneLine(a.error.message) : `down (${a.down}; not asked again for a while)`);
    } else if (a.entry.maxWorkspaces !== null && a.value.workspaces >= a.entry.maxWorkspaces) {
      reasons.set(a.entry, `full (${a.value.workspaces} of maxWorkspaces ${a.entry.maxWorkspaces})`);
    } else {
      const need = await needBytes(a.value);
      if (a.value.freeBytes !== null && a.value.freeBytes < need)
        reasons.set(a.entry, `no room (${a.value.freeBytes} bytes free, ${need} needed)`);
      else fits.push({ entry: a.entry, load: a.value });
    }
  }
  const choose = (): Placement | null => {
    const inflight = reservations();
    let best: { entry: PoolEntry; score: number } | null = null;
    for (const f of fits) {
      const score = placementScore(f.load, inflight.get(f.entry.id) ?? 0);
      if (!best || score < best.score) best = { entry: f.entry, score };
    }
    return best && { ...best, release: reserve(best.entry.id) };
  };
  const dir = poolStateDir();
  // Choosing and reserving under one lock: two creates that asked at the same moment still differ.
  const chosen = dir === null ? choose() : await withLock(join(dir, "place.lock"), async () => choose());
  if (chosen) return chosen;
  const why = pool.entries.map((e) => `${e.label}: ${reasons.get(e) ?? "not a candidate"}`).join("; ");
  // Only hosts that could not be asked leave a chance that retrying helps: that is a network failure.
  const anyDown = loads.some((a) => !a.ok);
  throw new RuntimeError(anyDown ? "network" : "remote-dependency", `No host of the pool can take the workspace: ${why}`);
}

export function recordFor(entry: PoolEntry, workspaceId: string): PlacementRecord {
  return { workspaceId, hostId: entry.id, label: entry.label, raw: entry.raw };
}

export function recordPlacement(owner: string, entry: PoolEntry, workspaceId: string): void {
  writePlacement(owner, recordFor(entry, workspaceId));
}

/**
 * Finds a workspace whose placement record is lost by asking every host of the pool in parallel
 * (and records the answer). Never "missing" while a host that may hold it cannot be asked: that is
 * a network error naming those hosts.
 */
export async function findWorkspace(raw: Record<string, unknown>, owner: string, workspaceId: string): Promise<Located> {
  const pool = await loadPool(raw);
  const answers = await acrossHosts(pool.entries, (e) => callOn(e, "workspace.inspect", { workspaceId, owner }));
  const holder = answers.find((a) => (a.ok ? a.value.status !== "missing" : a.error.errorClass === "ownership"));
  if (holder) {
    recordPlacement(owner, holder.entry, workspaceId);
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
