// The large-object row: a repository with one committed file of BENCH_BIG_MB MiB (1536 = 1.5 GiB
// by default; --quick: 512) of incompressible bytes, its objects loose as a fresh commit leaves
// them. One `git archive HEAD | ssh host tar -x` reference, then one first create (a cold project
// cache), direct to the rig's sshd, with every process of the create sampled from /proc: the
// runtime process, the broker, local git, the host agent, host git. The target: create ≤ 1.5 ×
// the reference; our own processes under 150 MiB RSS; no process whose private memory grows with
// the file. One sample only: the machine is shared, and the row costs minutes of both cores.
import { existsSync, mkdirSync, openSync, closeSync, writeSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { brokers, sshdSessions, startTimeline, summariseTimeline } from "./procs.mjs";
import { git } from "./repos.mjs";
import { lastLine, runCommand } from "./runtime-driver.mjs";
import { reason } from "./sampling.mjs";
import { loadavg } from "node:os";
import { rigOptions, sshArgs } from "./rig.mjs";

const MiB = 1024 * 1024;
/** Ours: the runtime process, its broker and the host agent. */
const OURS = /^(runtime process|broker|host agent)/;
const OWN_LIMIT_MB = 150;
const FACTOR = 1.5;

/** The fixture, cached between runs (building it costs a minute of CPU): one commit, loose objects. */
async function bigRepo(cacheDir, sizeMb, log) {
  const dir = join(cacheDir, `big-file-${sizeMb}`);
  if (existsSync(join(dir, ".git", "paseo-bench-complete"))) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  log(`big file: writing a ${sizeMb} MiB file of random bytes and committing it (once; cached in ${dir})`);
  const fd = openSync(join(dir, "big.bin"), "w");
  try {
    for (let i = 0; i < sizeMb; i++) writeSync(fd, randomBytes(MiB));
  } finally {
    closeSync(fd);
  }
  await git(["init", "-q", "-b", "main", "."], { cwd: dir });
  await git(["config", "gc.auto", "0"], { cwd: dir });
  await git(["add", "big.bin"], { cwd: dir });
  await git(["-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q", "-m", "one big file"], { cwd: dir });
  closeSync(openSync(join(dir, ".git", "paseo-bench-complete"), "w"));
  return dir;
}

export async function benchBigFile(ctx, { cacheDir, sizeMb }) {
  const { rt, rig } = ctx;
  const log = (s) => ctx.log(`[big file] ${s}`);
  const rootName = `.paseo-ssh-test-${rig.runId}-bench-big`;
  const options = rigOptions(ctx, rig.port, rootName);
  const ssh = (...args) => sshArgs(ctx, rig.port, ...args);
  const out = { sizeMb, label: `one committed ${sizeMb} MiB file of random bytes, loose` };
  try {
    const repo = await bigRepo(cacheDir, sizeMb, log);
    out.loadBefore = loadavg().map((x) => +x.toFixed(2));
    const dir = `${rootName}-archive`;
    log("git archive | ssh tar -x");
    const quoted = ssh().map((a) => `'${a}'`);
    const a = await runCommand(
      "sh",
      ["-c", `git -C '${repo}' archive HEAD | ssh ${quoted.join(" ")} 'mkdir -p ${dir} && tar -x -C ${dir}'`],
      {
        timeoutMs: 900_000,
      },
    );
    await runCommand("ssh", ssh(`rm -rf ${dir}`));
    if (a.code !== 0) throw new Error(`git archive | ssh tar: ${lastLine(a.stderr)}`);
    out.archiveMs = Math.round(a.ms);

    // First contact (agent install, broker, host daemon) is not part of the row.
    await rt.op("create", {
      workspaceId: "bench-big-warm",
      options,
      extra: {
        input: {
          workspaceId: "bench-big-warm",
          project: { projectId: "bench-big-warm", source: { kind: "directory", path: ctx.repos.tiny.path } },
          placement: { kind: "existing" },
        },
      },
    });
    log("first create");
    const watch = [
      ...brokers(ctx.tmp).map((pid) => ({ pid, label: "broker (SSH client)" })),
      ...sshdSessions(ctx.sshdPid).map((pid) => ({ pid, label: "host sshd sessions" })),
    ];
    const t0 = performance.now();
    let sampler = null;
    const workspaceId = "bench-big-1";
    const r = await rt.op("create", {
      workspaceId,
      options,
      extra: {
        input: {
          workspaceId,
          project: { projectId: "bench-big", source: { kind: "directory", path: repo } },
          placement: { kind: "existing" },
        },
      },
      extraEnv: { PASEO_SSH_PROGRESS: "1" },
      onSpawn: (child) => {
        sampler = startTimeline({ hostMark: rootName, localDirs: [repo], rootPid: child.pid, watch, since: t0 });
      },
    });
    const timeline = sampler ? summariseTimeline(sampler.stop(), t0) : [];
    out.loadAfter = loadavg().map((x) => +x.toFixed(2));
    out.createMs = Math.round(r.ms);
    out.marks = Object.fromEntries(
      r.stderr
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l))
        .map((m) => [m.phase, m.ms]),
    );
    // The broker may have started during this create (the first op of the run's root).
    out.processes = timeline.map((t) => ({
      label: t.label,
      n: t.n,
      cpuMs: Math.round(t.cpuMs),
      peakRssMB: +(t.peakRssKb / 1024).toFixed(1),
      peakPrivateMB: +(t.peakPrivateKb / 1024).toFixed(1),
    }));
    for (const b of brokers(ctx.tmp))
      if (!watch.some((w) => w.pid === b)) log(`broker ${b} started during the create: its memory is not in the rows`);
    const ratio = out.createMs / out.archiveMs;
    const own = out.processes.filter((p) => OURS.test(p.label));
    const ownMax = Math.max(0, ...own.map((p) => p.peakRssMB));
    // "Grows with the file": private memory past a quarter of the file (and past what a process
    // of ours may use in all).
    const growing = out.processes.filter((p) => p.peakPrivateMB > Math.max(sizeMb / 4, OWN_LIMIT_MB));
    out.target = {
      met: ratio <= FACTOR && ownMax < OWN_LIMIT_MB && growing.length === 0,
      text:
        `create ${(out.createMs / 1000).toFixed(1)} s = ${ratio.toFixed(2)}× tar ${(out.archiveMs / 1000).toFixed(1)} s (limit ${FACTOR}×); ` +
        `our processes peak ${ownMax} MB RSS (limit ${OWN_LIMIT_MB}); ` +
        (growing.length
          ? `private memory growing with the file: ${growing.map((p) => `${p.label} ${p.peakPrivateMB} MB`).join(", ")}`
          : "no process's private memory grows with the file"),
    };
    log(out.target.text);
    await rt.op("destroy", { workspaceId, options }).catch((e) => log(`destroy: ${reason(e)}`));
  } catch (err) {
    out.unavailable = reason(err);
    log(`unavailable: ${out.unavailable}`);
  } finally {
    await runCommand("ssh", ssh(`rm -rf ${rootName}`)).catch(() => undefined);
  }
  return out;
}

/** The row's section of the report. */
export function bigFileMarkdown(b, table) {
  if (!b) return [];
  const out = ["", `### Large object (${b.label})`, ""];
  if (b.unavailable) return [...out, `n/a (${b.unavailable})`];
  out.push(
    `**${b.target.met ? "met" : "MISSED"}**: ${b.target.text}. Load average (1/5/15 min) before ${b.loadBefore.join("/")}, after ${b.loadAfter.join("/")}. ` +
      `Progress marks (ms): ${Object.entries(b.marks)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")}.`,
    "",
    table(
      ["process", "n", "CPU (ms)", "peak RSS (MB)", "peak private (MB)"],
      b.processes.map((p) => [p.label, p.n, p.cpuMs, p.peakRssMB, p.peakPrivateMB]),
    ),
  );
  return out;
}
