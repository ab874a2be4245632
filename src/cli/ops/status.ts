// `status --options '<json>'` (or `--options-file`), `--json true` for JSON lines: one row per host of
// the pool (a single `host` is a pool of one), like `kubectl get nodes`: reachable, load per CPU,
// free disk, memory available, workspaces, live execs, cordoned. Every host is asked, FANOUT at a time
// (pool.load, one round trip each, bounded by connectTimeoutMs); exit 0 only if every host answered.
// Below the table, the ports forwarded to this machine (README "Reaching servers on the host"), as
// the running broker of each reachable host holds them (none runs: nothing is forwarded; none is
// started for this).
import { RuntimeError, oneLine } from "../../shared/errors.js";
import type { CliOperation } from "../operation.js";
import { readOptionsFlag } from "../options-flag.js";
import { isPoolOptions } from "../../workspace/pool/detect.js";
import { acrossHosts, callOn, loadPool } from "../../workspace/pool/pool.js";
import { parseEntries } from "../../workspace/pool/pool-options.js";
import type { HostLoad } from "../../shared/agent-api.js";
import { heldNotices } from "../../broker/client/held-notices.js";
import { isInteger, isString } from "../../shared/guards.js";

const GiB = 1024 ** 3;
const gib = (n: number | null) => (n === null ? "?" : `${(n / GiB).toFixed(1)}Gi`);

interface Forward {
  workspaceId: string;
  hostPort: number;
  localPort: number;
  pid: number;
  argv0: string;
  since: string;
  named: boolean;
}

interface Row {
  host: string;
  reachable: boolean;
  cordoned: boolean;
  maxWorkspaces: number | null;
  load?: HostLoad;
  error?: string;
  forwards: Forward[];
}

/** Columns padded to their widest cell (the last one is not padded). */
function grid(head: string[], cells: string[][]): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i]!))).join("  ");
  return [line(head), ...cells.map(line)];
}

/** The forwards in a broker's "ports" notices (each: key = workspace id, forwards = its view). */
function forwardsOf(notices: Array<Record<string, unknown>>): Forward[] {
  const out: Forward[] = [];
  for (const n of notices) {
    if (!isString(n.key) || !Array.isArray(n.forwards)) continue;
    for (const f of n.forwards as Array<Record<string, unknown>>) {
      if (!isInteger(f.hostPort) || !isInteger(f.localPort) || !isInteger(f.pid) || !isString(f.argv0) || !isInteger(f.since)) continue;
      out.push({
        workspaceId: n.key,
        hostPort: f.hostPort,
        localPort: f.localPort,
        pid: f.pid,
        argv0: f.argv0,
        since: new Date(f.since).toISOString(),
        named: f.named === true,
      });
    }
  }
  return out.sort((a, b) => a.workspaceId.localeCompare(b.workspaceId) || a.hostPort - b.hostPort);
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
  const errors = rows.filter((r) => r.error).map((r) => `${r.host}: ${r.error}`);
  const forwards = rows.flatMap((r) =>
    r.forwards.map((f) => [r.host, f.workspaceId, String(f.hostPort), String(f.localPort), String(f.pid), f.argv0, f.since]),
  );
  const section =
    forwards.length > 0
      ? ["", "FORWARDED PORTS", ...grid(["HOST", "WORKSPACE", "HOST PORT", "LOCAL PORT", "PID", "PROCESS", "SINCE"], forwards)]
      : [];
  return [...grid(head, cells), ...errors, ...section].join("\n") + "\n";
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
    // The forwards are read from each reachable host's running broker, within the same fan-out.
    const answers = await acrossHosts(entries, async (e, start) => {
      const load = await callOn(e, "pool.load", { projectKey: null }, undefined, start);
      const held = await heldNotices(e.options, "ports", e.options.connectTimeoutMs).then(
        (n): { forwards: Forward[]; error?: string } => ({ forwards: forwardsOf(n) }),
        (err: Error) => ({ forwards: [], error: `forwarded ports unknown: ${oneLine(err.message)}` }),
      );
      return { load, held };
    });
    const rows: Row[] = answers.map((a) => ({
      host: a.entry.label,
      reachable: a.ok,
      cordoned: a.entry.cordoned,
      maxWorkspaces: a.entry.maxWorkspaces,
      ...(a.ok ? { load: a.value.load } : { error: oneLine(a.error.message) }),
      ...(a.ok && a.value.held.error ? { error: a.value.held.error } : {}),
      forwards: a.ok ? a.value.held.forwards : [],
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
