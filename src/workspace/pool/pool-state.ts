// What a pool remembers on the Paseo host, in the private broker directory (0700, ours): where each
// workspace was placed, which hosts were found down a moment ago, which creates are under way, and
// the last hostsCommand answer. Every write is atomic (temporary file, then rename); all of it is a
// cache of what the hosts themselves say, so losing it costs round trips, never a workspace.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { homedir, tmpdir } from "node:os";
import { brokerDir, brokerDirCandidates, privateStateDir } from "../../broker/common/broker-paths.js";
import { RuntimeError } from "../../shared/errors.js";
import { sha256Hex } from "../../shared/sha256.js";
import { randomHex } from "../../shared/random.js";

/** A host found unreachable is not waited for again by creates for this long (distcc uses 60 s). */
export const DOWN_BACKOFF_MS = 30_000;
/** A reservation older than this is a create that died without removing it. */
const RESERVATION_STALE_MS = 10 * 60_000;

/**
 * `<broker dir>/pool`, or with no broker directory to be had (every name squatted in a shared
 * TMPDIR, or too long for sockets) the user's private state directory: a pool never runs without
 * its records, reservations and down marks (every retried create would be placed afresh).
 */
export function poolStateDir(): string {
  const dir = brokerDir() ?? privateStateDir();
  if (dir === null) {
    const where = process.env.XDG_STATE_HOME || join(process.env.HOME || homedir(), ".local", "state");
    throw new RuntimeError(
      "input",
      `A pool needs a private directory for its placement records: neither the broker directory (${brokerDirCandidates({ xdgRuntimeDir: process.env.XDG_RUNTIME_DIR, tmp: tmpdir() })[0]} and its alternatives) nor ${join(where, "paseo-ssh")} is ours and closed to others; set XDG_RUNTIME_DIR or XDG_STATE_HOME to a directory of your own`,
    );
  }
  const pool = join(dir, "pool");
  mkdirSync(pool, { recursive: true, mode: 0o700 });
  return pool;
}

function sub(...parts: string[]): string {
  const base = poolStateDir();
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

/**
 * Where a workspace lives: the host entry by identity (hostId), its options taken from the runtime
 * entry as it is now (locate.ts); `entry`, its own keys, only reach a host that left the list.
 */
export interface PlacementRecord {
  workspaceId: string;
  hostId: string;
  label: string;
  entry: Record<string, unknown>;
  /** The pool runtime entry that placed it (pool.ts Pool.scope); absent in records written before scopes. */
  scope?: string;
}

function placementPath(owner: string, workspaceId: string): string {
  const dir = sub("placements", sha256Hex(owner).slice(0, 16));
  return join(dir, `${sha256Hex(workspaceId).slice(0, 32)}.json`);
}

/** A record's entry; one written before records named their entry kept the merged options as `raw`. */
function withEntry(r: Partial<PlacementRecord> & { raw?: unknown }): PlacementRecord | null {
  const { raw, ...rest } = r;
  const entry = rest.entry ?? raw;
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return null;
  return { ...(rest as PlacementRecord), entry: entry as Record<string, unknown> };
}

export function readPlacement(owner: string, workspaceId: string): PlacementRecord | null {
  const path = placementPath(owner, workspaceId);
  const value = readJson(path);
  if (typeof value !== "object" || value === null) return null;
  const r = value as Partial<PlacementRecord>;
  if (r.workspaceId !== workspaceId || typeof r.hostId !== "string" || typeof r.label !== "string") return null;
  return withEntry(r);
}

export function writePlacement(owner: string, record: PlacementRecord): void {
  const path = placementPath(owner, record.workspaceId);
  writeAtomic(path, JSON.stringify(record));
}

export function removePlacement(owner: string, workspaceId: string): void {
  const path = placementPath(owner, workspaceId);
  rmSync(path, { force: true });
}

/** Recorded when a host could not be reached; read by placement to skip it for DOWN_BACKOFF_MS. */
export function markDown(hostId: string, why: string): void {
  const dir = sub("down");
  writeAtomic(join(dir, hostId), JSON.stringify({ at: Date.now(), why }));
}

export function markUp(hostId: string): void {
  const dir = sub("down");
  rmSync(join(dir, hostId), { force: true });
}

/** Why the host was found down within the backoff, or null. */
export function recentlyDown(hostId: string, now = Date.now()): string | null {
  const dir = sub("down");
  const value = readJson(join(dir, hostId)) as { at?: unknown; why?: unknown } | null;
  if (!value || typeof value.at !== "number" || now - value.at > DOWN_BACKOFF_MS) return null;
  return typeof value.why === "string" ? value.why : "unreachable";
}

/** A create under way on a host, so concurrent creates (any process of ours) spread instead of piling up. */
export function reserve(hostId: string, workspaceId: string): () => void {
  const dir = sub("inflight");
  const path = join(dir, `${hostId}.${process.pid}.${randomHex(4)}`);
  // The workspace id, so that the host can say which of them already claimed their directory.
  writeFileSync(path, workspaceId, { mode: 0o600 });
  return () => rmSync(path, { force: true });
}

/** Live reservations per host id: the workspace ids of the creates under way towards it. */
export function reservations(now = Date.now()): Map<string, string[]> {
  const byHost = new Map<string, string[]>();
  const dir = sub("inflight");
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    let workspaceId: string;
    try {
      if (now - statSync(path).mtimeMs > RESERVATION_STALE_MS) {
        rmSync(path, { force: true });
        continue;
      }
      workspaceId = readFileSync(path, "utf8");
    } catch {
      continue;
    }
    const id = name.split(".")[0]!;
    byHost.set(id, [...(byHost.get(id) ?? []), workspaceId]);
  }
  return byHost;
}

/** The cached hostsCommand answer for this argv, if younger than `maxAgeMs`. */
export function cachedHostList(key: string, maxAgeMs: number, now = Date.now()): unknown[] | null {
  const dir = sub("hosts-command");
  const value = readJson(join(dir, `${key}.json`)) as { at?: unknown; hosts?: unknown } | null;
  if (!value || typeof value.at !== "number" || now - value.at > maxAgeMs || !Array.isArray(value.hosts)) return null;
  return value.hosts;
}

export function cacheHostList(key: string, hosts: unknown[]): void {
  const dir = sub("hosts-command");
  writeAtomic(join(dir, `${key}.json`), JSON.stringify({ at: Date.now(), hosts }));
}

/** Every placement record of this owner (reconcile also visits hosts that left the list). */
export function listPlacements(owner: string): PlacementRecord[] {
  const dir = sub("placements", sha256Hex(owner).slice(0, 16));
  return readdirSync(dir)
    .filter((n) => n.endsWith(".json"))
    .map((n) => readJson(join(dir, n)) as Partial<PlacementRecord> | null)
    .map((r) =>
      r && typeof r.workspaceId === "string" && typeof r.hostId === "string" && typeof r.label === "string" ? withEntry(r) : null,
    )
    .filter((r): r is PlacementRecord => r !== null);
}
