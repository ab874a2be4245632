// Where an exec's (or a signal's) time goes. The workload is `/bin/date +%s%N` (it prints when it
// ran); the runtime process runs with bench/trace-hook.cjs preloaded, which timestamps node's
// start-up, its child processes and every socket event; its SSH traffic crosses a delay proxy
// that records when each chunk was on the wire (the broker itself is not instrumented: it starts
// with a minimal environment, and the wire shows its part anyway). All clocks are this machine's
// wall clock, so one exec's path lines up: spawn → node start-up → CLI loading → broker
// connect/hello → request → onto the SSH wire → reply back off the wire → reply at the CLI →
// fd4 `started` → `exit`. Landmarks are found by socket role (the CLI's first connection, the
// wire's direction), not by message contents, so the profile survives protocol changes; a missing
// landmark leaves its phase empty rather than guessed.
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const HOOK = fileURLToPath(new URL("./trace-hook.cjs", import.meta.url));

/** Environment that makes runtime processes record traces in `dir`. */
export function traceEnv(dir) {
  mkdirSync(dir, { recursive: true });
  const prior = process.env.NODE_OPTIONS ? `${process.env.NODE_OPTIONS} ` : "";
  return { NODE_OPTIONS: `${prior}--require ${HOOK}`, PASEO_BENCH_TRACE_DIR: dir };
}

function readLines(file) {
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

/** The delay proxy's records: { direction: "up" | "down", bytes, receivedAt, sentAt }. */
export const wireTrace = readLines;

/** Reads the CLI trace of the process `pid` and removes the file. */
export function takeCliTrace(dir, pid) {
  const file = join(dir, `cli-${pid}.jsonl`);
  const events = readLines(file);
  rmSync(file, { force: true });
  return events;
}

/** The exec chain from spawn to process end; consecutive, so the rows add up to the total. */
export const PHASES = [
  ["node", "node start-up (spawn → preload)"],
  ["load", "CLI loading (→ reads the fd3 envelope)"],
  ["setup", "envelope → first connect (options, host configuration)"],
  ["hello", "connect → first bytes back (broker hello)"],
  ["prepare", "→ first request written"],
  ["out", "request → its bytes on the SSH wire (broker)"],
  ["host", "on the wire → last reply before `started` back off it (RTT, sshd, agent, spawn; PTY: its channel too)"],
  ["back", "reply off the wire → at the CLI (broker)"],
  ["fd4Started", "CLI: reply → fd4 `started` written"],
  ["seenStarted", "fd4 `started` → read by Paseo (bench)"],
  ["toExit", "`started` → fd4 `exit` read"],
  ["close", "`exit` → runtime process gone"],
];
/** Not part of the chain: where the workload itself shows up, and how many requests it took. */
export const NOTES = [
  ["workloadRan", "first request written → workload running (from its own clock)"],
  ["requests", "requests written to the broker before `started` (count)"],
  ["trips", "chunks sent on the SSH wire between request and reply (≈ round trips)"],
  ["children", "child processes the CLI ran before connecting (ms, summed)"],
];

/** A one-shot operation (signal): the same chain, ending when the process exits. */
export const OP_PHASES = [
  ["node", "node start-up (spawn → preload)"],
  ["load", "CLI loading, request, options (→ first connect)"],
  ["hello", "connect → first bytes back (broker hello)"],
  ["prepare", "→ first request written"],
  ["out", "request → its bytes on the SSH wire (broker)"],
  ["host", "on the wire → last reply back off it (RTT(s), sshd, agent)"],
  ["back", "reply off the wire → at the CLI (broker)"],
  ["finish", "CLI: last reply → exit"],
  ["close", "exit → process gone (seen by Paseo)"],
];
export const OP_NOTES = NOTES.slice(2);

/** When `date +%s%N` ran, in epoch ms (NaN if it printed something else). */
function workloadEpoch(stdout) {
  const m = /(\d{19})/.exec(stdout ?? "");
  return m ? Number(BigInt(m[1]) / 1000n) / 1000 : NaN;
}

const span = (a, b) => (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) ? null : b - a);

/**
 * The landmarks of one traced process up to `end(cli)` (fd4 `started`, or exit): the CLI's first
 * connection and its hello, first request and last reply before the end, and on the wire the first
 * chunk out after that request and the last chunk delivered back before that reply.
 */
function landmarks(cli, wire, end) {
  const P = cli.find((e) => e.ev === "preload")?.t;
  const conn = cli.find((e) => e.ev === "connect");
  const C = conn?.t;
  const onLink = cli.filter((e) => conn && e.s === conn.s);
  const H = onLink.find((e) => e.ev === "data")?.t;
  const F = end(cli);
  const within = (t, a, b) => a !== undefined && b !== undefined && t >= a && t <= b;
  const requests = onLink.filter((e) => e.ev === "write" && within(e.t, H, F));
  const Q1 = requests[0]?.t;
  const D = onLink.filter((e) => e.ev === "data" && within(e.t, Q1, F)).pop()?.t;
  const Out = wire.find((e) => e.direction === "up" && within(e.receivedAt, Q1, D))?.receivedAt;
  const Back = wire.filter((e) => e.direction === "down" && within(e.sentAt, Out, D)).pop()?.sentAt;
  const trips = Out === undefined ? null : wire.filter((e) => e.direction === "up" && within(e.receivedAt, Out, Back)).length;
  const spawned = new Map(cli.filter((e) => e.ev === "spawn" && C !== undefined && e.t < C).map((e) => [e.pid, e.t]));
  const children =
    C === undefined
      ? null
      : cli.filter((e) => e.ev === "child-exit" && spawned.has(e.pid)).reduce((sum, e) => sum + (e.t - spawned.get(e.pid)), 0);
  return { P, C, H, F, Q1, D, Out, Back, trips, children, requests: F === undefined ? null : requests.length };
}

/** Phases of one traced exec; `r` is runtime-driver's result (spawnEpoch; started, exited, close in ms). */
export function execPhases(r, cli, wire) {
  const S = r.spawnEpoch;
  const L = landmarks(cli, wire, (c) => c.find((e) => e.ev === "write" && e.s === "fd4" && e.k === "started")?.t);
  const E = cli.find((e) => e.ev === "data" && e.s === "fd3")?.t;
  return {
    node: span(S, L.P),
    load: span(L.P, E),
    setup: span(E, L.C),
    hello: span(L.C, L.H),
    prepare: span(L.H, L.Q1),
    out: span(L.Q1, L.Out),
    host: span(L.Out, L.Back),
    back: span(L.Back, L.D),
    fd4Started: span(L.D, L.F),
    seenStarted: span(L.F, S + r.started),
    toExit: span(S + r.started, S + r.exited),
    close: span(S + r.exited, S + r.close),
    total: r.close,
    workloadRan: span(L.Q1, workloadEpoch(r.stdout)),
    requests: L.requests,
    trips: L.trips,
    children: L.children,
  };
}

/** Phases of one traced one-shot operation; `r` is runCommand's result. */
export function opPhases(r, cli, wire) {
  const S = r.spawnEpoch;
  const L = landmarks(cli, wire, (c) => c.find((e) => e.ev === "exit")?.t);
  return {
    node: span(S, L.P),
    load: span(L.P, L.C),
    hello: span(L.C, L.H),
    prepare: span(L.H, L.Q1),
    out: span(L.Q1, L.Out),
    host: span(L.Out, L.Back),
    back: span(L.Back, L.D),
    finish: span(L.D, L.F),
    close: span(L.F, S + r.ms),
    total: r.ms,
    trips: L.trips,
    children: L.children,
  };
}

const median = (xs) => {
  const s = xs.filter((x) => x !== null && Number.isFinite(x)).sort((a, b) => a - b);
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
