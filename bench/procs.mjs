// What the bench reads from /proc: which processes are ours (brokers by the bench's private TMPDIR
// in their environment; the rig's sshd and its descendants; anything naming our remote roots),
// their memory, and a cheap timeline sampler that shows which git and node processes ran when
// during a create. Nothing here relies on the runtime's own stats, whose fields change with its
// design.
import { readFileSync, readdirSync, readlinkSync, realpathSync } from "node:fs";

const CLK_TCK = 100;
const NODE_EXE = realpathSync(process.execPath);

const read = (path) => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
};

export function pids() {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .map(Number);
}

/** Parsed /proc/<pid>/stat fields we use, or null when the process is gone. */
export function stat(pid) {
  const text = read(`/proc/${pid}/stat`);
  if (!text) return null;
  const close = text.lastIndexOf(")");
  const comm = text.slice(text.indexOf("(") + 1, close);
  const f = text.slice(close + 2).split(" ");
  // f[0] = state (field 3); ppid is field 4, utime 14, stime 15, starttime 22.
  return {
    pid,
    comm,
    state: f[0],
    ppid: Number(f[1]),
    cpuMs: ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK,
    startTicks: Number(f[19]),
  };
}

export function cmdline(pid) {
  return (read(`/proc/${pid}/cmdline`) ?? "").split("\0").filter(Boolean).join(" ");
}

export function rssKb(pid) {
  const m = /VmRSS:\s+(\d+)/.exec(read(`/proc/${pid}/status`) ?? "");
  return m ? Number(m[1]) : 0;
}

/**
 * Resident memory (kB) and its private part: RssAnon (heap, stacks, anonymous maps). Pages of
 * mmapped files (git's pack windows, a loose object it maps) are resident but not private: the
 * kernel drops them under pressure, and they do not grow a process's own footprint.
 */
export function memoryKb(pid) {
  const text = read(`/proc/${pid}/status`) ?? "";
  const field = (name) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(text)?.[1] ?? 0);
  return { rss: field("VmRSS"), private: field("RssAnon"), hwm: field("VmHWM") };
}

function exe(pid) {
  try {
    return realpathSync(readlinkSync(`/proc/${pid}/exe`));
  } catch {
    return "";
  }
}

function inTmp(pid, tmp) {
  const env = read(`/proc/${pid}/environ`);
  return env !== null && env.split("\0").includes(`TMPDIR=${tmp}`);
}

/**
 * Our brokers: node processes whose TMPDIR is the bench's private one (a broker keeps TMPDIR
 * from its starter, which is how it finds its socket directory) that the bench did not start
 * itself (every runtime operation is a direct child of the bench; a broker is started detached by
 * one of them).
 */
export function brokers(tmp) {
  return pids().filter((pid) => {
    const s = stat(pid);
    return s && s.ppid !== process.pid && s.state !== "Z" && exe(pid) === NODE_EXE && inTmp(pid, tmp);
  });
}

/** Live children of `pid`, recursively. */
export function descendants(root) {
  const all = pids()
    .map(stat)
    .filter((s) => s && s.state !== "Z");
  const out = [];
  const walk = (p) => {
    for (const s of all) if (s.ppid === p) out.push(s.pid) && walk(s.pid);
  };
  walk(root);
  return out;
}

/**
 * Host-side processes of this run: everything under the rig's sshd, plus anything whose command
 * line names one of our remote roots (a host daemon that left its session behind).
 */
export function hostProcesses(sshdPid, rootMark) {
  const under = new Set(sshdPid ? descendants(sshdPid) : []);
  for (const pid of pids()) if (!under.has(pid) && cmdline(pid).includes(rootMark)) under.add(pid);
  const list = [...under].map((pid) => ({ pid, comm: stat(pid)?.comm ?? "?", cmd: cmdline(pid), rssKb: rssKb(pid) }));
  const kind = (p) => (/^sshd/.test(p.comm) ? "sshd" : p.cmd.includes(rootMark) && /node/.test(p.comm) ? "agent" : "other");
  const by = { sshd: 0, agent: 0, other: 0 };
  let agentRssKb = 0;
  for (const p of list) {
    by[kind(p)]++;
    if (kind(p) === "agent") agentRssKb += p.rssKb;
  }
  return { total: list.length, ...by, agentRssKb, pids: list.map((p) => p.pid) };
}

/** The rig's sshd session processes (its descendants named sshd), which carry our SSH traffic. */
export function sshdSessions(sshdPid) {
  return sshdPid ? descendants(sshdPid).filter((pid) => /^sshd/.test(stat(pid)?.comm ?? "")) : [];
}

/** SIGTERM, then SIGKILL after `graceMs` whatever is still there; resolves with what needed SIGKILL. */
export async function terminate(list, graceMs = 3000) {
  for (const pid of list) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + graceMs;
  const alive = () => list.filter((pid) => (stat(pid)?.state ?? "Z") !== "Z");
  while (alive().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const left = alive();
  for (const pid of left) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  return left;
}

/** Milliseconds since boot on the performance.now() clock, from /proc/uptime (10 ms resolution). */
function bootOffset() {
  const up = Number((read("/proc/uptime") ?? "0").split(" ")[0]) * 1000;
  return performance.now() - up;
}

/**
 * Samples /proc every `everyMs` while a create runs and keeps the git and node processes that
 * belong to it: local ones (descendants of `rootPid`, or working in `localDirs`) and host ones
 * (working in or naming `hostMark`), and the long-lived ones in `watch` ({ pid, label }). Cheap:
 * a directory listing per tick, a few reads per new process, one stat read per tracked process.
 * Processes shorter than a tick may be missed. `since`: when the create started (performance.now()).
 */
export function startTimeline({ hostMark, localDirs, rootPid, watch = [], since = performance.now(), everyMs = 25, resetPeak = null }) {
  const offset = bootOffset();
  const t0 = since;
  const settled = new Set();
  const tracked = new Map();
  const parents = new Map();
  const cwd = (pid) => {
    try {
      return readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      return "";
    }
  };
  const isDescendant = (s, root) => {
    for (let p = s.ppid, n = 0; p > 1 && n < 20; n++) {
      if (p === root) return true;
      p = parents.get(p) ?? stat(p)?.ppid ?? 0;
    }
    return false;
  };
  /** "host"/"local"/"runtime" or null; `cmd` empty means the process is already gone. */
  const sideOf = (pid, s, cmd) => {
    const dir = cwd(pid);
    if (cmd.includes(hostMark) || dir.includes(hostMark)) return "host";
    if (pid === rootPid) return "runtime";
    if (localDirs.some((d) => dir.startsWith(d)) || isDescendant(s, rootPid)) return "local";
    return null;
  };
  const labelOf = (side, s, cmd) => {
    if (side === "runtime") return "runtime process";
    if (/^git/.test(s.comm)) return `${side} git ${gitSub(cmd)}`;
    if (side === "host" && /node/.test(s.comm)) return "host agent (node)";
    return null;
  };
  const tick = () => {
    const t = performance.now();
    for (const pid of pids()) {
      if (settled.has(pid) || tracked.has(pid)) continue;
      const s = stat(pid);
      if (!s) continue;
      parents.set(pid, s.ppid);
      const cmd = cmdline(pid);
      const start = (s.startTicks * 1000) / CLK_TCK + offset;
      const side = cmd ? sideOf(pid, s, cmd) : null;
      const label = side ? labelOf(side, s, cmd) : null;
      if (!label) {
        // A child caught between fork and exec still looks like its parent: look again later.
        if (t - start > 250) settled.add(pid);
        continue;
      }
      // A process already running (the host agent) counts only the CPU it uses from now on (and,
      // with `resetPeak`, only its peak memory from now on).
      const before = start < t0 - everyMs;
      if (before) resetPeak?.(pid);
      tracked.set(pid, {
        side,
        label,
        before,
        start: Math.max(start, t0),
        end: t,
        cpu0: before ? s.cpuMs : 0,
        cpuMs: s.cpuMs,
        rssKb: 0,
        privateKb: 0,
        hwmKb: 0,
      });
    }
    for (const [pid, p] of tracked) {
      if (p.done) continue;
      const s = stat(pid);
      if (!s || s.state === "Z") {
        p.done = true;
        continue;
      }
      p.end = t;
      p.cpuMs = s.cpuMs;
      const m = memoryKb(pid);
      p.rssKb = Math.max(p.rssKb, m.rss);
      p.privateKb = Math.max(p.privateKb, m.private);
      p.hwmKb = Math.max(p.hwmKb ?? 0, m.hwm);
      // Forked git helpers exec into their own command after we first saw them.
      const cmd = p.side !== "runtime" && /^git/.test(s.comm) ? cmdline(pid) : "";
      if (cmd) p.label = labelOf(p.side, s, cmd) ?? p.label;
    }
  };
  // Long-lived processes on the data path (our broker, the host's sshd sessions): their CPU
  // during the create.
  for (const { pid, label } of watch) {
    const s = stat(pid);
    if (s)
      tracked.set(pid, {
        side: "runtime",
        label,
        before: false,
        start: t0,
        end: t0,
        cpu0: s.cpuMs,
        cpuMs: s.cpuMs,
        rssKb: 0,
        privateKb: 0,
      });
  }
  tick();
  const timer = setInterval(tick, everyMs);
  return {
    stop() {
      clearInterval(timer);
      tick();
      return [...tracked.values()].map((p) => ({
        label: p.before ? `${p.label}, already running` : p.label,
        start: p.start,
        end: Math.max(p.end, p.start),
        cpuMs: p.cpuMs - p.cpu0,
        rssKb: p.rssKb,
        privateKb: p.privateKb,
        hwmKb: p.hwmKb ?? 0,
      }));
    },
  };
}

/** The git subcommand of a command line (`git -c a=b checkout …`, `git-upload-pack …`). */
function gitSub(cmd) {
  const words = cmd.split(" ");
  const dashed = /(?:^|\/)git-([a-z-]+)$/.exec(words[0] ?? "");
  if (dashed) return dashed[1];
  for (let i = 1; i < words.length; i++) {
    if (words[i] === "-c" || words[i] === "-C") i++;
    else if (!words[i].startsWith("-")) return words[i].includes("/") ? "(helper)" : words[i];
  }
  return "(unknown)";
}

/**
 * Groups a timeline into rows: per label, how many processes, when the first started and the last
 * ended (ms after `t0`), and their CPU time. Runs longer than the sample tick only.
 */
export function summariseTimeline(entries, t0) {
  const rows = new Map();
  for (const e of entries) {
    const r = rows.get(e.label) ?? {
      label: e.label,
      n: 0,
      from: Infinity,
      to: -Infinity,
      cpuMs: 0,
      peakRssKb: 0,
      peakPrivateKb: 0,
      peakHwmKb: 0,
    };
    r.n++;
    r.peakRssKb = Math.max(r.peakRssKb, e.rssKb ?? 0);
    r.peakPrivateKb = Math.max(r.peakPrivateKb, e.privateKb ?? 0);
    r.peakHwmKb = Math.max(r.peakHwmKb, e.hwmKb ?? 0);
    r.from = Math.min(r.from, e.start - t0);
    r.to = Math.max(r.to, e.end - t0);
    r.cpuMs += e.cpuMs;
    rows.set(e.label, r);
  }
  return [...rows.values()].sort((a, b) => a.from - b.from).map((r) => ({ ...r, from: Math.round(r.from), to: Math.round(r.to) }));
}
