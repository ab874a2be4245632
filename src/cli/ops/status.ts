// `status --options '<json>'` (or `--options-file`), `--json true` for JSON lines: one row per host of
// the pool (a single `host` is a pool of one), like `kubectl get nodes`: reachable, load per CPU,
// free disk, memory available, workspaces, live execs, cordoned. Every host is asked, FANOUT at a time
// (pool.load, one round trip each, bounded by connectTimeoutMs); exit 0 only if every host answered.
import { RuntimeError, oneLine } from "../../shared/errors.js";
import type { CliOperation } from "../operation.js";
import { readOptionsFlag } from "../options-flag.js";
import { isPoolOptions } from "../../broker/host-pool/detect.js";
import { acrossHosts, callOn, loadPool } from "../../broker/host-pool/pool.js";
import { parseEntries } from "../../broker/host-pool/options.js";
import type { HostLoad } from "../../shared/agent-api.js";

const GiB = 1024 ** 3;
const gib = (n: number | null) => (n === null ? "?" : `${(n / GiB).toFixed(1)}Gi`);

interface Row {
  host: string;
  reachable: boolean;
  cordoned: boolean;
  maxWorkspaces: number | null;
  load?: HostLoad;
  error?: string;
}

function table(rows: Row[]): string {
  const head = ["HOST", "REACHABLE", "LOAD/CPU", "FREE DISK", "MEMORY", "WORKSPACES", "EXECS", "CORDONED"];
  const cells = rows.map((r) => [
    r.host,
    r.reachable ? "yes" : "no",
    r.load ? r.load.loadPerCpu.toFixed(2) : "-",
    r.load ? gib(r.load.freeBytes) : "-",
    r.load ? gib(r.load.memAvailableBytes) : "-",
    r.load ? `${r.load.workspaces}${r.maxWorkspaces !== null ? `/${r.maxWorkspaces}` : ""}` : "-",
    r.load ? String(r.load.liveExecs) : "-",
    r.cordoned ? "yes" : "no",
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i]!))).join("  ");
  const errors = rows.filter((r) => r.error).map((r) => `${r.host}: ${r.error}`);
  return [line(head), ...cells.map(line), ...errors].join("\n") + "\n";
}

const operation: CliOperation = {
  requiredFlags: [],
  optionalFlags: ["options", "options-file", "json"],
  async run(args, io) {
    const raw = readOptionsFlag(args.flags, "status");
    const json = args.flags.json;
    if (json !== undefined && json !== "true" && json !== "false") throw new RuntimeError("input", "--json takes true or false");
    const entries = isPoolOptions(raw)
      ? (await loadPool(raw)).entries
      : parseEntries({}, [raw], "host").map((e) => ({ ...e, label: e.label.replace(/^host\[0\] /, "") }));
    const answers = await acrossHosts(entries, (e, start) => callOn(e, "pool.load", { projectKey: null }, undefined, start));
    const rows: Row[] = answers.map((a) => ({
      host: a.entry.label,
      reachable: a.ok,
      cordoned: a.entry.cordoned,
      maxWorkspaces: a.entry.maxWorkspaces,
      ...(a.ok ? { load: a.value } : { error: oneLine(a.error.message) }),
    }));
    io.stdout.write(json === "true" ? rows.map((r) => JSON.stringify(r)).join("\n") + "\n" : table(rows));
    const down = rows.filter((r) => !r.reachable);
    if (down.length > 0)
      throw new RuntimeError(
        "network",
        `status: ${down.length} of ${rows.length} host(s) unreachable: ${down.map((r) => r.host).join(", ")}`,
      );
  },
};
export default operation;
