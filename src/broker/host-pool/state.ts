// What a pool remembers on the Paseo host, in the private broker directory (0700, ours): where each
// workspace was placed, which hosts were found down a moment ago, which creates are under way, and
// the last hostsCommand answer. Every write is atomic (temporary file, then rename); all of it is a
// cache of what the hosts themselves say, so losing it costs round trips, never a workspace.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { brokerDir } from "../paths.js";
import { sha256Hex } from "../../shared/sha256.js";
import { randomHex } from "../../shared/random.js";

/** A host found unreachable is not waited for again by creates for this long (distcc uses 60 s). */
export const DOWN_BACKOFF_MS = 30_000;
/** A reservation older than this is a create that died without removing it. */
const RESERVATION_STALE_MS = 10 * 60_000;

export function poolStateDir(): string | null {
  const dir = brokerDir();
  if (dir === null) return null;
  const pool = join(dir, "pool");
  mkdirSync(pool, { recursive: true, mode: 0o700 });
  return pool;
}

function sub(...parts: string[]): string | null {
  const base = poolStateDir();
  if (base === null) return null;
  const dir = join(base, ...parts);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

export function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.${randomHex(6)}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, path);
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as unknown;
  } catch {
    return null;
  }
}

/** Where a workspace lives: the host entry's merged options (so a host that left the list stays reachable). */
export interface PlacementRecord {
  workspaceId: string;
  hostId: string;
  label: string;
  raw: Record<string, unknown>;
}

function placementPath(owner: string, workspaceId: string): string | null {
  const dir = sub("placements", sha256Hex(owner).slice(0, 16));
  return dir && join(dir, `${sha256Hex(workspaceId).slice(0, 32)}.json`);
}

export function readPlacement(owner: string, workspaceId: string): PlacementRecord | null {
  const path = placementPath(owner, workspaceId);
  const value = path === null ? null : readJson(path);
  if (typeof value !== "object" || value === null) return null;
  const r = value as Partial<PlacementRecord>;
  if (r.workspaceId !== workspaceId || typeof r.hostId !== "string" || typeof r.label !== "string") return null;
  if (typeof r.raw !== "object" || r.raw === null) return null;
  return r as PlacementRecord;
}

export function writePlacement(owner: string, record: PlacementRecord): void {
  const path = placementPath(owner, record.workspaceId);
  if (path !== null) writeAtomic(path, JSON.stringify(record));
}

export function removePlacement(owner: string, workspaceId: string): void {
  const path = placementPath(owner, workspaceId);
  if (path !== null) rmSync(path, { force: true });
}

/** Recorded when a host could not be reached; read by placement to skip it for DOWN_BACKOFF_MS. */
export function markDown(hostId: string, why: string): void {
  const dir = sub("down");
  if (dir !== null) writeAtomic(join(dir, hostId), JSON.stringify({ at: Date.now(), why }));
}

export function markUp(hostId: string): void {
  const dir = sub("down");
  if (dir !== null) rmSync(join(dir, hostId), { force: true });
}

/** Why the host was found down within the backoff, or null. */
export function recentlyDown(hostId: string, now = Date.now()): string | null {
  const dir = sub("down");
  const value = dir === null ? null : (readJson(join(dir, hostId)) as { at?: unknown; why?: unknown } | null);
  if (!value || typeof value.at !== "number" || now - value.at > DOWN_BACKOFF_MS) return null;
  return typeof value.why === "string" ? value.why : "unreachable";
}

/** A create under way on a host, so concurrent creates (any process of ours) spread instead of piling up. */
export function reserve(hostId: string): () => void {
  const dir = sub("inflight");
  if (dir === null) return () => {};
  const path = join(dir, `${hostId}.${process.pid}.${randomHex(4)}`);
  writeFileSync(path, "", { mode: 0o600 });
  return () => rmSync(path, { force: true });
}

/** Live reservations per host id. */
export function reservations(now = Date.now()): Map<string, number> {
  const counts = new Map<string, number>();
  const dir = sub("inflight");
  if (dir === null) return counts;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    try {
      if (now - statSync(path).mtimeMs > RESERVATION_STALE_MS) {
        rmSync(path, { force: true });
        continue;
      }
    } catch {
      continue;
    }
    const id = name.split(".")[0]!;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** The cached hostsCommand answer for this argv, if younger than `maxAgeMs`. */
export function cachedHostList(key: string, maxAgeMs: number, now = Date.now()): unknown[] | null {
  const dir = sub("hosts-command");
  const value = dir === null ? null : (readJson(join(dir, `${key}.json`)) as { at?: unknown; hosts?: unknown } | null);
  if (!value || typeof value.at !== "number" || now - value.at > maxAgeMs || !Array.isArray(value.hosts)) return null;
  return value.hosts;
}

export function cacheHostList(key: string, hosts: unknown[]): void {
  const dir = sub("hosts-command");
  if (dir !== null) writeAtomic(join(dir, `${key}.json`), JSON.stringify({ at: Date.now(), hosts }));
}

/** Every placement record of this owner (reconcile also visits hosts that left the list). */
export function listPlacements(owner: string): PlacementRecord[] {
  const dir = sub("placements", sha256Hex(owner).slice(0, 16));
  if (dir === null) return [];
  return readdirSync(dir)
    .filter((n) => n.endsWith(".json"))
    .map((n) => readJson(join(dir, n)) as PlacementRecord | null)
    .filter((r): r is PlacementRecord => !!r && typeof r.workspaceId === "string" && typeof r.raw === "object" && r.raw !== null);
}
