// The performance targets, each evaluated per network path from rows measured in the same run:
// the measured value, its ratio to the reference, the limit, and met / missed (null when a row
// it needs is unavailable or was not run, with the reason).

const r0 = (x) => Math.round(x);
const has = (row) => row && !row.unavailable && Number.isFinite(row.p50);
const why = (...rows) => {
  const bad = rows.find((r) => !r || r.unavailable);
  return bad ? (bad.unavailable ?? "not run") : "not run";
};
const cell = (met, text) => ({ met, text });
const na = (...rows) => cell(null, `n/a (${why(...rows)})`);

/** value ≤ reference + allowance (ms). */
function additive(value, reference, allowance, refText) {
  if (!has(value) || !has(reference)) return na(value, reference);
  const over = value.p50 - reference.p50;
  const ratio = value.p50 / reference.p50;
  return cell(
    over <= allowance,
    `${r0(value.p50)} ms = ${refText(reference.p50)} ${over >= 0 ? "+" : "−"} ${r0(Math.abs(over))} ms (${ratio.toFixed(2)}×)`,
  );
}

/** value ≤ factor × reference. */
function multiplicative(value, reference, factor) {
  if (!has(value) || !has(reference)) return na(value, reference);
  const ratio = value.p50 / reference.p50;
  return cell(ratio <= factor, `${ratio.toFixed(2)}× (${r0(value.p50)} / ${r0(reference.p50)} ms)`);
}

const withRtt = (row, rttMs) => (has(row) ? { ...row, p50: row.p50 + rttMs } : row);

export function evaluate(net) {
  const rows = net.rows;
  const rtt = net.rttMs;
  const floor = withRtt(rows.node, rtt);
  const t = [];
  const add = (id, what, c) => t.push({ id, what, ...c });
  add("1a", "exec `/bin/true` p50 ≤ floor + 30 ms (floor = `node -e 0` p50 + 1 RTT)", {
    cell: has(rows.node) ? additive(rows["execTrue.exit"], floor, 30, (f) => `floor ${r0(f)} ms`) : na(rows.node),
  });
  add("1b", "`describe` p50 ≤ `node -e 0` p50 + 15 ms", { cell: additive(rows.describe, rows.node, 15, (f) => `node ${r0(f)} ms`) });
  for (const [id, key, name] of [
    ["2a", "fixture", "5,000-file fixture"],
    ["2b", "realistic", "realistic repository"],
  ]) {
    const c = net.creates?.[key];
    add(id, `first create ≤ 1.3 × \`git archive | ssh tar -x\`, ${name}`, { cell: c ? multiplicative(c.first, c.archive, 1.3) : na() });
  }
  for (const [id, key, name] of [
    ["3a", "fixture", "5,000-file fixture"],
    ["3b", "realistic", "realistic repository"],
  ]) {
    const c = net.creates?.[key];
    add(id, `second workspace of the same commit ≤ 0.15 × first, ${name}, started right after the first`, {
      cell: c ? multiplicative(c.second, c.first, 0.15) : na(),
    });
  }
  for (const [id, key, name] of [
    ["3c", "fixture", "5,000-file fixture"],
    ["3d", "realistic", "realistic repository"],
  ]) {
    const c = net.creates?.[key];
    add(id, `another workspace of the same commit ≤ 0.15 × first, ${name}, started once the host's spare is ready`, {
      cell: c?.spaced ? multiplicative(c.spaced, c.first, 0.15) : na(),
    });
  }
  add("4a", "PTY exec: start → fd4 `started` ≤ pipes + 1 RTT", {
    cell: additive(rows["ptyEcho.started"], withRtt(rows["pipesEcho.started"], rtt), 0, (f) => `pipes+RTT ${r0(f)} ms`),
  });
  add("4b", "PTY exec: start → first output ≤ pipes + 1 RTT", {
    cell: additive(rows["ptyEcho.firstOutput"], withRtt(rows["pipesEcho.firstOutput"], rtt), 0, (f) => `pipes+RTT ${r0(f)} ms`),
  });
  add("5", "broker RSS ≤ 60 MB with 100 live execs attached", { cell: rssCell(net.live) });
  add("6a", "signal p50 ≤ 400 ms", {
    cell: has(rows.signal) ? cell(rows.signal.p50 <= 400, `${r0(rows.signal.p50)} ms`) : na(rows.signal),
  });
  add("6b", "a commit the host already has sends no object bytes (re-create; second workspace)", { cell: bytesCell(net.creates) });
  // Placement asks the three hosts in parallel (one round trip) and estimates the checkout's size
  // locally; 30 ms is that local work and the facts' answer, as 1a allows an exec's.
  add("7a", "create, pool of three hosts p50 ≤ one host entry + 1 RTT + 30 ms (one-file workspace)", {
    cell: additive(rows.createPool, withRtt(rows.createSingle, rtt), 30, (f) => `one host+RTT ${r0(f)} ms`),
  });
  // A pool workspace's operations read its placement record and go straight to its host.
  add("7b", "exec `/bin/true` on a pool workspace p50 ≤ one host entry + 10 ms", {
    cell: additive(rows.execPool, rows.execSingle, 10, (f) => `one host ${r0(f)} ms`),
  });
  add("7c", "inspect of a pool workspace p50 ≤ one host entry + 10 ms", {
    cell: additive(rows.inspectPool, rows.inspectSingle, 10, (f) => `one host ${r0(f)} ms`),
  });
  return t;
}

function rssCell(live) {
  if (!live) return na();
  if (live.unavailable) return cell(null, `n/a (${live.unavailable})`);
  const d = live.during;
  const text = `${d.brokers.rssMB} MB in ${d.brokers.count} broker(s), ${live.n - live.startFailures}/${live.n} started, ${live.clean}/${live.n} ended cleanly`;
  if (live.n < 100) return cell(null, `n/a (only ${live.n} execs): ${text}`);
  if (d.brokers.count === 0) return cell(null, `n/a (no broker process found): ${text}`);
  return cell(d.brokers.rssMB <= 60 && live.startFailures === 0, text);
}

function bytesCell(creates) {
  const parts = [];
  let met = null;
  for (const [key, c] of Object.entries(creates ?? {})) {
    for (const [what, row] of [
      ["re-create", c.noop],
      ["second", c.second],
      ["spare", c.spaced],
    ]) {
      if (!row || row.unavailable) continue;
      if (row.bytes === null || row.bytes === undefined) {
        parts.push(`${key} ${what}: no byte count reported`);
        continue;
      }
      parts.push(`${key} ${what}: ${row.bytes} B`);
      met = (met ?? true) && row.bytes === 0;
    }
  }
  return parts.length ? cell(met, parts.join("; ")) : na();
}
