// Turns one bench run into text: the Markdown that goes between the markers of bench/RESULTS.md
// (targets with their ratios and met/missed, the rows behind them, process counts, where exec
// and create time goes) and a short targets summary for the terminal.
import { readFileSync, writeFileSync } from "node:fs";
import { NOTES, OP_NOTES, OP_PHASES, PHASES } from "./exec-profile.mjs";
import { bigFileMarkdown } from "./big-file.mjs";
import { mirrorMarkdown } from "./mirror.mjs";
import { portsMarkdown, portsSummary } from "./ports.mjs";
import { scaleMarkdown } from "./scale.mjs";

const r0 = (x) => (Number.isFinite(x) ? Math.round(x) : "–");
const verdict = (met) => (met === null ? "n/a" : met ? "met" : "**missed**");

function statCell(row) {
  if (!row) return "not run";
  if (row.unavailable) return `unavailable: ${row.unavailable}`;
  if (!Number.isFinite(row.p50)) return "–";
  return row.n > 1 ? `${r0(row.p50)} [${r0(row.min)}–${r0(row.max)}]` : `${r0(row.p50)}`;
}

function table(header, lines) {
  return [
    `| ${header.join(" | ")} |`,
    `|${header.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`,
    ...lines.map((l) => `| ${l.join(" | ")} |`),
  ].join("\n");
}

export function markdown(results) {
  const nets = Object.values(results.networks);
  const names = nets.map((n) => n.name);
  const out = [];
  const load = results.load;
  out.push(
    `Measured ${results.when} (${results.mode} run, ${results.minutes} min) on ${results.cpus} CPUs, node ${results.node}, ${results.git}, ${results.ssh}. ` +
      `**Load average (1 min) during the run: min ${load.during.min}, median ${load.during.median}, max ${load.during.max}** ` +
      `(1/5/15 min at start ${load.start.join("/")}, at end ${load.end.join("/")}). ` +
      `Every runtime row is a fresh \`node dist/cli.js\` process started as Paseo starts it. Latency rows: p50 [min–max] of ${results.plan.rounds} interleaved rounds ` +
      `(each round runs every row once, in rotating order); creates: p50 of ${results.plan.createSamples} round(s) of archive, first create (a new project each round), second workspace. 50 ms RTT = bench/delay-proxy.mjs (25 ms each way) in front of the rig's sshd; ` +
      `the RTT in the floors is the one measured through it in this run.`,
  );
  out.push("", `Repositories: fixture = ${results.repos.fixture ?? "not run"}; realistic = ${results.repos.realistic ?? "not run"}.`);

  out.push("", "### Targets", "");
  const targetIds = nets[0]?.targets.map((t) => t.id) ?? [];
  out.push(
    table(
      ["target", ...names],
      targetIds.map((id) => {
        const t = nets[0].targets.find((x) => x.id === id);
        return [
          `${id}. ${t.what}`,
          ...nets.map((n) => {
            const c = n.targets.find((x) => x.id === id).cell;
            return `${c.text} — ${verdict(c.met)}`;
          }),
        ];
      }),
    ),
  );

  out.push("", "### Latency (ms)", "");
  const latency = [
    ["rtt", "RTT through the path (TCP echo, measured)"],
    ["node", null],
    ["describe", null],
    ["execTrue.started", null],
    ["execTrue.exit", null],
    ["pipesEcho.started", null],
    ["pipesEcho.firstOutput", null],
    ["pipesEcho.exit", null],
    ["ptyEcho.started", null],
    ["ptyEcho.firstOutput", null],
    ["ptyEcho.exit", null],
    ["signal", null],
    ["controlMaster", null],
    ["freshSsh", null],
    ["firstContact", null],
    ["createSingle", null],
    ["createPool", null],
    ["execSingle", null],
    ["execPool", null],
    ["inspectSingle", null],
    ["inspectPool", null],
  ];
  out.push(
    table(
      ["row", ...names],
      latency
        .filter(([k]) => nets.some((n) => n.rows[k]))
        .map(([k, label]) => [label ?? nets.find((n) => n.rows[k]).rows[k].label, ...nets.map((n) => statCell(n.rows[k]))]),
    ),
  );

  const repoIds = [...new Set(nets.flatMap((n) => Object.keys(n.creates ?? {})))];
  if (repoIds.length) {
    out.push("", "### Creates (ms; bytes = object bytes the runtime reported sending)", "");
    const lines = [];
    for (const id of repoIds) {
      const get = (n, k) => n.creates?.[id]?.[k];
      lines.push([`**${id}**`, ...nets.map(() => "")]);
      for (const [k, label] of [
        ["archive", "`git archive HEAD | ssh host tar -x`"],
        ["first", "create, first workspace"],
        ["second", "create, second workspace, same commit"],
        ["spaced", "create, another workspace once the host's spare is ready"],
        ["noop", "create again, same workspace (no-op)"],
        ["oneFile", "create after a one-file commit"],
      ]) {
        if (!nets.some((n) => get(n, k))) continue;
        lines.push([
          label,
          ...nets.map((n) => {
            const row = get(n, k);
            const bytes =
              row && !row.unavailable && row.bytes !== undefined && row.bytes !== null ? `, ${row.bytes.toLocaleString("en")} B` : "";
            return `${statCell(row)}${bytes}`;
          }),
        ]);
      }
    }
    out.push(table(["", ...names], lines));
  }

  out.push("", "### Processes", "");
  const procLines = [];
  const b = (s) => (s ? `${s.count} broker(s), ${s.rssMB} MB RSS` : "–");
  const h = (s) =>
    s ? `${s.total} (sshd ${s.sshd}, agent ${s.agent}, other ${s.other}); agents ${(s.agentRssKb / 1024).toFixed(1)} MB RSS` : "–";
  procLines.push(["brokers after the creates", ...nets.map((n) => b(n.procs.afterCreates?.brokers))]);
  procLines.push(["brokers after the latency rounds", ...nets.map((n) => b(n.procs.idle?.brokers))]);
  procLines.push(["host processes after the latency rounds", ...nets.map((n) => h(n.procs.idle?.host))]);
  if (nets.some((n) => n.live)) {
    const live = (n, f) => (n.live && !n.live.unavailable ? f(n.live) : (n.live?.unavailable ?? "not run"));
    procLines.push([
      "live execs: started / start time",
      ...nets.map((n) => live(n, (l) => `${l.n - l.startFailures}/${l.n} in ${l.startMs} ms`)),
    ]);
    procLines.push([
      "brokers, before → with all live → after",
      ...nets.map((n) => live(n, (l) => `${b(l.before)} → ${b(l.during.brokers)} → ${b(l.after)}`)),
    ]);
    procLines.push(["host processes with all live", ...nets.map((n) => live(n, (l) => h(l.during.host)))]);
    procLines.push(["exec wrappers' RSS, all live", ...nets.map((n) => live(n, (l) => `${l.during.wrapperRssMB} MB`))]);
    procLines.push([
      "ended cleanly (fd4 exit 0 after input closed)",
      ...nets.map((n) => live(n, (l) => `${l.clean}/${l.n}${l.errors.length ? `; ${l.errors.join("; ")}` : ""}`)),
    ]);
  }
  procLines.push([
    "at the end: brokers stopped / needed SIGKILL; host processes left 10 s later",
    ...nets.map((n) => (n.procs.end ? `${n.procs.end.brokersStopped} / ${n.procs.end.brokersKilled}; ${n.procs.end.hostLingering}` : "–")),
  ]);
  out.push(table(["", ...names], procLines));
  const floor = results.memoryFloor;
  if (floor) {
    out.push(
      "",
      `For scale, idle RSS on this machine: bare node ${floor.node} MB, node with ssh2 loaded ${floor.ssh2} MB, with ssh2 and zod ${floor.ssh2Zod} MB.`,
    );
  }

  const profiled = nets.filter((n) => n.profiles && Object.keys(n.profiles).length);
  if (profiled.length) {
    const cols = profiled.flatMap((n) => ["pipes", "pty"].map((m) => ({ n, m })));
    const samples = profiled[0].profiles.pipes?.n ?? 0;
    out.push(
      "",
      `### Where an exec's time goes (ms, median of ${samples} traced execs of \`date\`; bench/trace-hook.cjs)`,
      "",
      table(
        ["phase", ...cols.map(({ n, m }) => `${n.name} ${m}`)],
        [...PHASES, ["total", "total (spawn → process gone)"], ...NOTES].map(([k, label]) => [
          label,
          ...cols.map(({ n, m }) => {
            const p = n.profiles[m];
            if (!p) return "–";
            if (p.unavailable) return `unavailable: ${p.unavailable}`;
            return p.phases[k] === null ? "–" : String(r0(p.phases[k]));
          }),
        ]),
      ),
    );
  }

  const signals = profiled.filter((n) => n.profiles.signal);
  if (signals.length) {
    const samples = signals[0].profiles.signal.n ?? 0;
    out.push(
      "",
      `### Where a \`signal\`'s time goes (ms, median of ${samples} traced SIGKILLs of a running \`sleep\`)`,
      "",
      table(
        ["phase", ...signals.map((n) => n.name)],
        [...OP_PHASES, ["total", "total (spawn → process gone)"], ...OP_NOTES].map(([k, label]) => [
          label,
          ...signals.map((n) => {
            const p = n.profiles.signal;
            if (p.unavailable) return `unavailable: ${p.unavailable}`;
            return p.phases[k] === null ? "–" : String(r0(p.phases[k]));
          }),
        ]),
      ),
    );
  }
  for (const n of profiled) {
    const kids = ["pipes", "pty"].map((m) => n.profiles[m]?.children).find((c) => c && c.length);
    if (kids)
      out.push("", `Child processes the runtime process started before connecting (${n.name}): ${kids.map((k) => `\`${k}\``).join(", ")}.`);
  }
  if (profiled.length)
    out.push("", "Each row is a median over the traced execs on its own, so the rows need not add up to the total exactly.");

  const timelines = [];
  for (const n of nets) {
    for (const [id, c] of Object.entries(n.creates ?? {})) {
      for (const k of ["first", "second", "spaced"]) {
        const row = c[k];
        if (!row || row.unavailable || !row.timeline) continue;
        const marks = Object.entries(row.marks ?? {})
          .map(([phase, ms]) => `${phase} ${ms}`)
          .join(", ");
        timelines.push(
          "",
          `**${id}, ${{ first: "first create", second: "second workspace", spaced: "workspace once the spare is ready" }[k]}, ${n.name}: p50 ${r0(row.p50)} ms; the round shown took ${r0(row.shownMs ?? row.p50)} ms.** Progress marks (ms): ${marks || "none"}.`,
          "",
          table(
            ["process", "n", "from–to (ms)", "CPU (ms)"],
            row.timeline.map((t) => [t.label, t.n, `${t.from}–${t.to}`, r0(t.cpuMs)]),
          ),
        );
      }
    }
  }
  out.push(...bigFileMarkdown(results.bigFile, table));
  out.push(...mirrorMarkdown(results.mirror, table));
  out.push(...portsMarkdown(results.ports, table));
  out.push(...scaleMarkdown(results, table));
  if (timelines.length) {
    out.push("", "### Where a create's time goes (processes sampled from /proc every 25 ms; shorter ones may be missing)", ...timelines);
  }
  return out.join("\n");
}

/** The targets as the terminal shows them after a run. */
export function summary(results) {
  const lines = ["", "Targets (measured; met / MISSED / n/a):"];
  for (const n of Object.values(results.networks)) {
    lines.push(`  ${n.name} (RTT ${n.rttMs.toFixed(1)} ms):`);
    for (const t of n.targets) {
      const v = t.cell.met === null ? "n/a   " : t.cell.met ? "met   " : "MISSED";
      lines.push(`    ${v} ${t.id.padEnd(3)} ${t.what}: ${t.cell.text}`);
    }
  }
  for (const m of results.mirror ?? []) lines.push(`  work comes back (${m.name}): ${m.target.met ? "met   " : "MISSED"} ${m.target.text}`);
  lines.push(...portsSummary(results.ports));
  if (results.bigFile?.target)
    lines.push(`  large object: ${results.bigFile.target.met ? "met   " : "MISSED"} ${results.bigFile.target.text}`);
  if (results.submodules?.target)
    lines.push(`  submodules: ${results.submodules.target.met ? "met   " : "MISSED"} ${results.submodules.target.text}`);
  if (results.manyFiles?.target)
    lines.push(`  many files: ${results.manyFiles.target.met ? "met   " : "MISSED"} ${results.manyFiles.target.text}`);
  return lines.join("\n");
}

/** Replaces the generated block of RESULTS.md, keeping the hand-written notes around it. */
export function writeResults(file, generated) {
  const [start, end] = ["<!-- bench:start -->", "<!-- bench:end -->"];
  let text = `# Benchmark results (\`npm run bench\`)\n\n${start}\n${end}\n`;
  try {
    const old = readFileSync(file, "utf8");
    if (old.includes(start) && old.includes(end)) text = old;
  } catch {
    // First run: start from the skeleton.
  }
  const before = text.slice(0, text.indexOf(start) + start.length);
  const after = text.slice(text.indexOf(end));
  writeFileSync(file, `${before}\n${generated}\n${after}`);
}
