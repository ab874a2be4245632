// Where an exec's time goes. The workload is `/bin/date +%s%N` (it prints when it ran); the
// runtime process and its broker run with bench/trace-hook.cjs preloaded, which timestamps node's
// start-up and every socket event. All clocks are this machine's wall clock, so one exec's path
// lines up: spawn → node start-up → CLI loading → broker connect/hello → request → broker relays
// onto SSH → workload runs → reply at the broker → reply at the CLI → fd4 `started` → `exit`.
// Landmarks are found by socket role (the CLI's first connection, the broker's SSH sockets), not
// by message contents, so the profile survives protocol changes; a missing landmark leaves its
// phase empty rather than guessed.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const HOOK = fileURLToPath(new URL("./trace-hook.cjs", import.meta.url));

/** Environment that makes runtime processes (and the brokers they start) record traces in `dir`. */
export function traceEnv(dir) {
  mkdirSync(dir, { recursive: true });
  const prior = process.env.NODE_OPTIONS ? `${process.env.NODE_OPTIONS} ` : "";
  return { NODE_OPTIONS: `${prior}--require ${HOOK}`, PASEO_BENCH_TRACE_DIR: dir };
}

function readTrace(file) {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return null;
      }
    })
    .filter(Boolean);
}

export function brokerTraces(dir) {
  return readdirSync(dir)
    .filter((f) => f.startsWith("broker-"))
    .flatMap((f) => readTrace(join(dir, f)));
}

/** The chain from spawn to process end; consecutive, so the rows add up to the total. */
export const PHASES = [
  ["node", "node start-up (spawn → preload)"],
  ["load", "CLI loading (→ reads the fd3 envelope)"],
  ["setup", "envelope → first connect (options, host configuration)"],
  ["hello", "connect → first bytes back (broker hello)"],
  ["prepare", "→ first request written"],
  ["brokerOut", "broker: request in → onto SSH"],
  ["host", "SSH out → last reply before `started` in (RTT, sshd, agent, spawn; PTY: its channel too)"],
  ["brokerBack", "broker: reply → CLI"],
  ["fd4Started", "CLI: reply → fd4 `started` written"],
  ["seenStarted", "fd4 `started` → read by Paseo (bench)"],
  ["toExit", "`started` → fd4 `exit` read"],
  ["close", "`exit` → runtime process gone"],
];
/** Not part of the chain: where the workload itself shows up, and how many requests it took. */
export const NOTES = [
  ["workloadRan", "first request written → workload running (from its own clock)"],
  ["requests", "requests written to the broker before `started` (count)"],
  ["children", "child processes the CLI ran before connecting (ms, summed)"],
];

/** When `date +%s%N` ran, in epoch ms (NaN if it printed something else). */
function workloadEpoch(stdout) {
  const m = /(\d{19})/.exec(stdout);
  return m ? Number(BigInt(m[1]) / 1000n) / 1000 : NaN;
}

/**
 * Phases of one traced exec. `r` is runtime-driver's result (spawnEpoch; started, exited, close in
 * ms after spawn), `cli` the CLI's trace, `broker` all broker events. The CLI's link is the first
 * connection it opens; the broker's SSH side is its TCP sockets, its client side accepted ones.
 */
export function execPhases(r, cli, broker) {
  const S = r.spawnEpoch;
  const W = workloadEpoch(r.stdout);
  const P = cli.find((e) => e.ev === "preload")?.t;
  const conn = cli.find((e) => e.ev === "connect");
  const C = conn?.t;
  const E = cli.find((e) => e.ev === "data" && e.s === "fd3")?.t;
  const spawned = new Map(cli.filter((e) => e.ev === "spawn" && C !== undefined && e.t < C).map((e) => [e.pid, e.t]));
  const children = cli.filter((e) => e.ev === "child-exit" && spawned.has(e.pid)).reduce((sum, e) => sum + (e.t - spawned.get(e.pid)), 0);
  const onLink = cli.filter((e) => conn && e.s === conn.s);
  const H = onLink.find((e) => e.ev === "data")?.t;
  const F = cli.find((e) => e.ev === "write" && e.s === "fd4" && e.k === "started")?.t;
  const before = (e, a, b) => a !== undefined && b !== undefined && e.t >= a && e.t <= b;
  const requests = onLink.filter((e) => e.ev === "write" && before(e, H, F));
  const Q1 = requests[0]?.t;
  const D = onLink.filter((e) => e.ev === "data" && before(e, Q1, F)).pop()?.t;
  const mine = broker.filter((e) => e.t >= S && e.t <= S + r.close);
  const Bin = mine.find((e) => e.ev === "data" && e.s === "accepted" && before(e, Q1, D))?.t;
  const Bout = mine.find((e) => e.ev === "write" && e.s.startsWith("tcp:") && before(e, Bin, D))?.t;
  const Bback = mine.filter((e) => e.ev === "data" && e.s.startsWith("tcp:") && before(e, Bout, D)).pop()?.t;
  const d = (a, b) => (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) ? null : b - a);
  return {
    node: d(S, P),
    load: d(P, E),
    setup: d(E, C),
    hello: d(C, H),
    prepare: d(H, Q1),
    brokerOut: d(Q1, Bout),
    host: d(Bout, Bback),
    brokerBack: d(Bback, D),
    fd4Started: d(D, F),
    seenStarted: d(F, S + r.started),
    toExit: d(S + r.started, S + r.exited),
    close: d(S + r.exited, S + r.close),
    total: r.close,
    workloadRan: d(Q1, W),
    requests: F === undefined ? null : requests.length,
    children: C === undefined ? null : children,
  };
}

/** A one-shot operation (signal): the same chain, ending when the process exits. */
export const OP_PHASES = [
  ["node", "node start-up (spawn → preload)"],
  ["load", "CLI loading, request, options (→ first connect)"],
  ["hello", "connect → first bytes back (broker hello)"],
  ["prepare", "→ first request written"],
  ["brokerOut", "broker: request in → onto SSH"],
  ["host", "SSH out → last reply in (RTT(s), sshd, agent)"],
  ["brokerBack", "broker: reply → CLI"],
  ["finish", "CLI: last reply → exit"],
  ["close", "exit → process gone (seen by Paseo)"],
];
export const OP_NOTES = [
  ["trips", "SSH writes by the broker between request and reply (≈ round trips)"],
  ["children", "child processes the CLI ran before connecting (ms, summed)"],
];

/** Phases of one traced one-shot operation; `r` is runCommand's result. */
export function opPhases(r, cli, broker) {
  const S = r.spawnEpoch;
  const P = cli.find((e) => e.ev === "preload")?.t;
  const X = cli.find((e) => e.ev === "exit")?.t;
  const conn = cli.find((e) => e.ev === "connect");
  const C = conn?.t;
  const onLink = cli.filter((e) => conn && e.s === conn.s);
  const H = onLink.find((e) => e.ev === "data")?.t;
  const Q1 = onLink.find((e) => e.ev === "write" && H !== undefined && e.t >= H)?.t;
  const D = onLink.filter((e) => e.ev === "data" && Q1 !== undefined && e.t >= Q1).pop()?.t;
  const within = (e, a, b) => a !== undefined && b !== undefined && e.t >= a && e.t <= b;
  const Bin = broker.find((e) => e.ev === "data" && e.s === "accepted" && within(e, Q1, D))?.t;
  const Bout = broker.find((e) => e.ev === "write" && e.s.startsWith("tcp:") && within(e, Bin, D))?.t;
  const Bback = broker.filter((e) => e.ev === "data" && e.s.startsWith("tcp:") && within(e, Bout, D)).pop()?.t;
  const d = (a, b) => (a === undefined || b === undefined ? null : b - a);
  const spawned = new Map(cli.filter((e) => e.ev === "spawn" && C !== undefined && e.t < C).map((e) => [e.pid, e.t]));
  return {
    node: d(S, P),
    load: d(P, C),
    hello: d(C, H),
    prepare: d(H, Q1),
    brokerOut: d(Q1, Bout),
    host: d(Bout, Bback),
    brokerBack: d(Bback, D),
    finish: d(D, X),
    close: d(X, S + r.ms),
    total: r.ms,
    trips: Bout === undefined ? null : broker.filter((e) => e.ev === "write" && e.s.startsWith("tcp:") && within(e, Bout, Bback)).length,
    children:
      C === undefined
        ? null
        : cli.filter((e) => e.ev === "child-exit" && spawned.has(e.pid)).reduce((sum, e) => sum + (e.t - spawned.get(e.pid)), 0),
  };
}

const median = (xs) => {
  const s = xs.filter((x) => x !== null).sort((a, b) => a - b);
  if (s.length === 0) return null;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Median of each phase over several traced runs. */
export function medianPhases(list) {
  const out = {};
  for (const key of Object.keys(list[0] ?? {})) out[key] = median(list.map((p) => p[key]));
  return out;
}

/** What the CLI started before connecting, e.g. ["ssh -G …"], from one trace. */
export function childCommands(cli) {
  const conn = cli.find((e) => e.ev === "connect");
  return cli.filter((e) => e.ev === "spawn" && (!conn || e.t < conn.t)).map((e) => e.what);
}

/** Reads the CLI trace of the process `pid` and removes the file. */
export function takeCliTrace(dir, pid) {
  const file = join(dir, `cli-${pid}.jsonl`);
  const events = readTrace(file);
  rmSync(file, { force: true });
  return events;
}
