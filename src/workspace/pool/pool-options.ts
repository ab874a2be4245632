// The pool form of the runtime options: `hosts` (an array of host entries) or `hostsCommand` (an
// argv printing them), with the other top-level keys as every entry's defaults. Each entry is
// checked exactly as a single-host options object is (parseRuntimeOptions), and its errors name the
// entry's index. Without either key none of this runs: a single `host` is parsed as it always was.
import { OptionError, parseRuntimeOptions, type RuntimeOptions } from "../../transport/options.js";
import { RuntimeError } from "../../shared/errors.js";
import { sha256Hex } from "../../shared/sha256.js";

export interface PoolEntry {
  /** Position in the host list (0-based), for messages. */
  index: number;
  /** `hosts[1] paseo@10.0.0.7:22`: how every message names this host. */
  label: string;
  /** Stable identity (host, port, user, root): keys placement records, down marks and reservations. */
  id: string;
  options: RuntimeOptions;
  /**
   * The entry's own connection keys as written (without the defaults, maxWorkspaces, cordoned):
   * what a placement record keeps, so a host that left the list is reached under the defaults of now.
   */
  own: Record<string, unknown>;
  maxWorkspaces: number | null;
  cordoned: boolean;
}

/** Where a workspace is: its host's options and how messages name it. */
export interface Located {
  options: RuntimeOptions;
  label: string;
}

export interface HostsCommand {
  argv: string[];
  timeoutMs: number;
  cacheMs: number;
}

export interface PoolSpec {
  defaults: Record<string, unknown>;
  hosts: unknown[] | null;
  hostsCommand: HostsCommand | null;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function boundedInt(value: unknown, key: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new RuntimeError("input", `Invalid runtime option "${key}": expected an integer ${min}-${max}`);
  }
  return value;
}

function parseHostsCommand(value: unknown): HostsCommand {
  const spec = Array.isArray(value) ? { argv: value } : value;
  const expected = 'expected an argv array of strings, or {"argv": [...], "timeoutMs": n, "cacheMs": n}';
  if (!isRecord(spec)) throw new RuntimeError("input", `Invalid runtime option "hostsCommand": ${expected}`);
  const unknown = Object.keys(spec).find((k) => !["argv", "timeoutMs", "cacheMs"].includes(k));
  if (unknown !== undefined) throw new RuntimeError("input", `Unknown runtime option "hostsCommand.${unknown}"`);
  const { argv } = spec;
  if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string" && !a.includes("\0")) || argv[0] === "") {
    throw new RuntimeError("input", `Invalid runtime option "hostsCommand": ${expected}`);
  }
  return {
    argv: argv as string[],
    timeoutMs: boundedInt(spec.timeoutMs, "hostsCommand.timeoutMs", 100, 600_000, 10_000),
    cacheMs: boundedInt(spec.cacheMs, "hostsCommand.cacheMs", 0, 3_600_000, 10_000),
  };
}

/** Splits a pool options object into its defaults and its host source, checking the pool's own keys. */
export function parsePoolSpec(raw: Record<string, unknown>): PoolSpec {
  const { hosts, hostsCommand, ...defaults } = raw;
  if ("host" in defaults) {
    throw new RuntimeError(
      "input",
      'Runtime options "host" and "hosts"/"hostsCommand" are exclusive: name each host in an entry of "hosts"',
    );
  }
  if (hosts !== undefined && hostsCommand !== undefined) {
    throw new RuntimeError("input", 'Runtime options "hosts" and "hostsCommand" are exclusive');
  }
  if ("cordoned" in defaults) throw new RuntimeError("input", 'Runtime option "cordoned" belongs in a host entry of "hosts"');
  if (hosts !== undefined && (!Array.isArray(hosts) || hosts.length === 0)) {
    throw new RuntimeError("input", 'Invalid runtime option "hosts": expected a non-empty array of host entries');
  }
  return {
    defaults,
    hosts: hosts === undefined ? null : (hosts as unknown[]),
    hostsCommand: hostsCommand === undefined ? null : parseHostsCommand(hostsCommand),
  };
}

/** `what` names where the entries came from in messages: `hosts` or `hostsCommand output`. */
export function parseEntries(defaults: Record<string, unknown>, hosts: unknown[], what = "hosts"): PoolEntry[] {
  if (hosts.length === 0) throw new RuntimeError("input", `${what} lists no host: a pool needs at least one`);
  const entries = hosts.map((entry, index) => parseEntry(defaults, entry, index, what));
  const seen = new Map<string, number>();
  for (const e of entries) {
    const earlier = seen.get(e.id);
    if (earlier !== undefined) throw new RuntimeError("input", `${what}[${e.index}] is the same host and root as ${what}[${earlier}]`);
    seen.set(e.id, e.index);
  }
  return entries;
}

export function parseEntry(defaults: Record<string, unknown>, entry: unknown, index: number, what: string): PoolEntry {
  const at = `${what}[${index}]`;
  if (!isRecord(entry)) throw new RuntimeError("input", `Invalid runtime option "${at}": expected an object with at least "host"`);
  const { maxWorkspaces: ownMax, cordoned, ...own } = entry;
  const { maxWorkspaces: defaultMax, ...connectionDefaults } = defaults;
  if (cordoned !== undefined && typeof cordoned !== "boolean") {
    throw new RuntimeError("input", `Invalid runtime option "${at}.cordoned": expected true or false`);
  }
  const maxValue = ownMax ?? defaultMax;
  const maxKey = ownMax !== undefined ? `${at}.maxWorkspaces` : "maxWorkspaces";
  const maxWorkspaces = maxValue === undefined ? null : boundedInt(maxValue, maxKey, 0, 100_000, 0);
  const raw = { ...connectionDefaults, ...own };
  let options: RuntimeOptions;
  try {
    options = parseRuntimeOptions(raw);
  } catch (err) {
    // The single-host message, with the key named where it was written (the entry or the defaults).
    if (!(err instanceof OptionError)) throw err;
    throw err.key in own || !(err.key in connectionDefaults) ? err.renamed(`${at}.${err.key}`) : err;
  }
  const id = sha256Hex(JSON.stringify([options.host, options.port, options.user, options.root])).slice(0, 16);
  const where = `${options.user}@${options.host.includes(":") ? `[${options.host}]` : options.host}:${options.port}`;
  return { index, label: `${at} ${where}`, id, options, own, maxWorkspaces, cordoned: cordoned === true };
}

/**
 * A host entry a placement record keeps (its own keys) under the pool's defaults as they are now.
 * A key of the record the schema no longer knows is dropped (the record is ours, written by an
 * earlier version); one in the defaults is the user's to fix and refused as usual.
 */
export function recordedEntry(defaults: Record<string, unknown>, recorded: Record<string, unknown>, label: string): PoolEntry {
  const own = { ...recorded };
  for (;;) {
    try {
      const [entry] = parseEntries(defaults, [own], "recorded host");
      return { ...entry!, label };
    } catch (err) {
      const stale = err instanceof OptionError && err.unknown ? err.key.replace(/^recorded host\[0\]\./, "") : null;
      if (stale === null || !(stale in own)) throw err;
      delete own[stale];
    }
  }
}
