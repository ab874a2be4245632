// Sample statistics for the bench. Latency rows are measured in interleaved rounds (each round runs
// every row once, in a rotating order) so that a load spike from another user of the machine hits
// the floor and the runtime alike instead of skewing one row.

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Row statistics from sample values (ms); `unavailable` rows carry the reason instead. */
export function stats(label, values) {
  return {
    label,
    n: values.length,
    p50: median(values),
    min: Math.min(...values),
    max: Math.max(...values),
    samples: values.map((x) => Math.round(x)),
  };
}

export const unavailable = (label, err) => ({ label, unavailable: reason(err) });

export function reason(err) {
  const text = err instanceof Error ? err.message : String(err);
  return text.trim().split("\n")[0].slice(0, 240);
}

/**
 * Runs `rows` (name → { label, run() → number | { [metric]: number } }) in `rounds` interleaved
 * rounds after `warm` unmeasured ones. A row that fails once is reported unavailable (with the
 * reason) and not run again; the others carry on. Metrics of object results become `name.metric`.
 */
export async function interleaved(rows, rounds, warm = 1, log = () => undefined) {
  const names = Object.keys(rows);
  const values = {};
  const failed = {};
  for (let r = -warm; r < rounds; r++) {
    if (r >= 0 && r % 5 === 0) log(`round ${r + 1}/${rounds}`);
    const offset = ((r % names.length) + names.length) % names.length;
    for (let i = 0; i < names.length; i++) {
      const name = names[(i + offset) % names.length];
      if (failed[name]) continue;
      try {
        const v = await rows[name].run();
        if (r < 0) continue;
        const metrics = typeof v === "number" ? { "": v } : v;
        for (const [m, x] of Object.entries(metrics)) {
          const key = m ? `${name}.${m}` : name;
          (values[key] ??= []).push(x);
        }
      } catch (err) {
        failed[name] = reason(err);
      }
    }
  }
  const out = {};
  for (const name of names) {
    if (failed[name]) out[name] = unavailable(rows[name].label, failed[name]);
    for (const key of Object.keys(values).filter((k) => k === name || k.startsWith(`${name}.`))) {
      if (failed[name]) continue;
      const metric = key.slice(name.length + 1);
      out[key] = stats(metric ? `${rows[name].label}: ${metric}` : rows[name].label, values[key]);
    }
  }
  return out;
}

/** `n` sequential samples after `warm` unmeasured ones; any failure makes the row unavailable. */
export async function sequential(label, n, fn, warm = 1) {
  try {
    for (let i = 0; i < warm; i++) await fn();
    const values = [];
    for (let i = 0; i < n; i++) values.push(await fn());
    return stats(label, values);
  } catch (err) {
    return unavailable(label, err);
  }
}

/** One timed run (creates: too expensive to repeat); the row carries what `fn` adds beside `ms`. */
export async function once(label, fn) {
  try {
    const { ms, ...extra } = await fn();
    return { ...stats(label, [ms]), ...extra };
  } catch (err) {
    return unavailable(label, err);
  }
}
