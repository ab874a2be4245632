// The scale rows (issue 30 items 13 and 16), direct to the rig's sshd, one sample each (the machine
// is shared; each row costs a minute of both cores):
//  - `submodules`: a superproject with BENCH_SUBMODULES (1,000) locally available submodules
//    against the same superproject commit with none of them available (the superproject alone:
//    each submodule left uninitialised). Target: ≤ 10 × the superproject alone.
//  - `files`: BENCH_FILES (200,000) small files plus one BENCH_FILES_BIG_MB (300) MiB file, first
//    create. Target: every process of ours (runtime process, broker, host daemon) peaks under
//    150 MiB RSS whatever the repository holds. Peaks are the kernel's (VmHWM; the already running
//    broker's and host daemon's are reset through /proc/<pid>/clear_refs first).
// Both print every sampled process with its CPU and peak RSS.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import { join } from "node:path";
import { manySubmodules } from "./many-submodules.mjs";
import { brokers, sshdSessions, startTimeline, summariseTimeline } from "./procs.mjs";
import { git } from "./repos.mjs";
import { runCommand } from "./runtime-driver.mjs";
import { reason } from "./sampling.mjs";
import { rigOptions, sshArgs } from "./rig.mjs";

const OURS = /^(runtime process|broker|host agent)/;
const OWN_LIMIT_MB = 150;
const SUBMODULE_FACTOR = 10;

/** Forgets a running process's peak RSS (VmHWM), so the next peak is this create's. Needs root or the same user. */
function resetPeak(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

/** The rig's options for a root of this row, and a create with every process sampled. */
function rowContext(ctx, rowName) {
  const { rt, rig } = ctx;
  const rootName = `.paseo-ssh-test-${rig.runId}-bench-${rowName}`;
  const options = rigOptions(ctx, rig.port, rootName);
  const ssh = (...args) => sshArgs(ctx, rig.port, ...args);
  // The project cache is keyed by the project id and the path: a new path is a cold cache.
  const input = (workspaceId, path) => ({
    input: {
      workspaceId,
      project: { projectId: `bench-${rowName}`, source: { kind: "directory", path } },
      placement: { kind: "existing" },
    },
  });
  /** One create, its progress marks and every process's CPU and peak memory. */
  const create = async (workspaceId, path) => {
    const watch = [
      ...brokers(ctx.tmp).map((pid) => ({ pid, label: "broker (SSH client)" })),
      ...sshdSessions(ctx.sshdPid).map((pid) => ({ pid, label: "host sshd sessions" })),
    ];
    for (const w of watch) resetPeak(w.pid);
    const t0 = performance.now();
    let sampler = null;
    const r = await rt.op("create", {
      workspaceId,
      options,
      extra: input(workspaceId, path),
      extraEnv: { PASEO_SSH_PROGRESS: "1" },
      // The create's own bound (30 minutes) rather than the bench's 3 for an operation.
      timeoutMs: 30 * 60_000,
      onSpawn: (child) => {
        sampler = startTimeline({ hostMark: rootName, localDirs: [path], rootPid: child.pid, watch, since: t0, resetPeak });
      },
    });
    const timeline = sampler ? summariseTimeline(sampler.stop(), t0) : [];
    const marks = {};
    for (const l of r.stderr.split("\n").filter((x) => x.startsWith("{"))) {
      const m = JSON.parse(l);
      if (m.phase !== "submodule-not-initialised") marks[m.phase] = m.ms;
    }
    return {
      ms: Math.round(r.ms),
      marks,
      processes: timeline.map((t) => ({
        label: t.label,
        n: t.n,
        cpuMs: Math.round(t.cpuMs),
        peakRssMB: +(Math.max(t.peakRssKb, t.peakHwmKb ?? 0) / 1024).toFixed(1),
      })),
    };
  };
  const warm = () =>
    rt.op("create", { workspaceId: "bench-warm", options, extra: input("bench-warm", ctx.repos.tiny.path) }).then(() => undefined);
  const cleanup = () => runCommand("ssh", ssh(`rm -rf ${rootName}`)).catch(() => undefined);
  return { create, warm, cleanup };
}

const ownPeak = (processes) => Math.max(0, ...processes.filter((p) => OURS.test(p.label)).map((p) => p.peakRssMB));

export async function benchSubmodules(ctx, { count }) {
  const log = (s) => ctx.log(`[submodules] ${s}`);
  const out = { count, label: `${count.toLocaleString("en")} submodules of one small commit each, in .git/modules` };
  const row = rowContext(ctx, "submodules");
  try {
    const dir = join(ctx.tmp, `many-submodules-${randomBytes(3).toString("hex")}`);
    const alone = manySubmodules(join(dir, "alone"), count, { available: false });
    const full = manySubmodules(join(dir, "full"), count);
    if (alone.commit !== full.commit) throw new Error("the two superprojects differ");
    await row.warm();
    out.loadBefore = loadavg().map((x) => +x.toFixed(2));
    log(`superproject alone (${count} submodules not available)`);
    out.alone = await row.create("alone", alone.path);
    log(`superproject with ${count} submodules`);
    out.full = await row.create("full", full.path);
    log("the same again, a second workspace (objects cached)");
    out.second = await row.create("full-2", full.path);
    out.loadAfter = loadavg().map((x) => +x.toFixed(2));
    const ratio = out.full.ms / out.alone.ms;
    out.target = {
      met: ratio <= SUBMODULE_FACTOR,
      text:
        `${count} submodules ${(out.full.ms / 1000).toFixed(1)} s = ${ratio.toFixed(1)}× the superproject alone ` +
        `${(out.alone.ms / 1000).toFixed(1)} s (limit ${SUBMODULE_FACTOR}×); second workspace ${(out.second.ms / 1000).toFixed(1)} s`,
    };
    log(out.target.text);
    rmSync(dir, { recursive: true, force: true });
  } catch (err) {
    out.unavailable = reason(err);
    log(`unavailable: ${out.unavailable}`);
  } finally {
    await row.cleanup();
  }
  return out;
}

/** `files` small files in `dirs` directories plus one `bigMb` MiB file of random bytes, one commit, by fast-import (cached). */
async function manyFilesRepo(cacheDir, files, bigMb, log) {
  const dir = join(cacheDir, `many-files-${files}-${bigMb}`);
  if (existsSync(join(dir, ".git", "paseo-bench-complete"))) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  log(`writing ${files} files and a ${bigMb} MiB file into one commit (once; cached in ${dir})`);
  await git(["init", "-q", "-b", "main", "."], { cwd: dir });
  await git(["config", "gc.auto", "0"], { cwd: dir });
  const fi = spawn("git", ["fast-import", "--quiet", "--done"], { cwd: dir, stdio: ["pipe", "ignore", "pipe"] });
  let err = "";
  fi.stderr.on("data", (d) => (err += d));
  const exited = new Promise((resolve, reject) => fi.on("close", (c) => (c === 0 ? resolve() : reject(new Error(`fast-import: ${err}`)))));
  const write = (s) => (fi.stdin.write(s) ? undefined : new Promise((r) => fi.stdin.once("drain", r)));
  await write("commit refs/heads/main\ncommitter bench <bench@example.invalid> 1767225600 +0000\ndata 10\nmany files\n");
  for (let i = 0; i < files; i++) {
    const body = `file ${i} ${"x".repeat(i % 200)}\n`;
    const path = `d${String(i % 500).padStart(3, "0")}/s${String(Math.floor(i / 500) % 40).padStart(2, "0")}/f${i}.txt`;
    await write(`M 100644 inline ${path}\ndata ${Buffer.byteLength(body)}\n${body}`);
  }
  if (bigMb > 0) {
    await write(`M 100644 inline big.bin\ndata ${bigMb * 1024 * 1024}\n`);
    for (let i = 0; i < bigMb; i++) await write(randomBytes(1024 * 1024));
    await write("\n");
  }
  fi.stdin.end("done\n");
  await exited;
  writeFileSync(join(dir, ".git", "paseo-bench-complete"), "");
  return dir;
}

export async function benchManyFiles(ctx, { cacheDir, files, bigMb }) {
  const log = (s) => ctx.log(`[files] ${s}`);
  const out = { files, bigMb, label: `${files.toLocaleString("en")} files and one ${bigMb} MiB file, one commit` };
  const row = rowContext(ctx, "files");
  try {
    const repo = await manyFilesRepo(cacheDir, files, bigMb, log);
    await row.warm();
    out.loadBefore = loadavg().map((x) => +x.toFixed(2));
    log("first create");
    out.first = await row.create("files-1", repo);
    out.loadAfter = loadavg().map((x) => +x.toFixed(2));
    const peak = ownPeak(out.first.processes);
    out.target = {
      met: peak < OWN_LIMIT_MB,
      text: `first create ${(out.first.ms / 1000).toFixed(1)} s; our processes peak ${peak} MB RSS (limit ${OWN_LIMIT_MB})`,
    };
    log(out.target.text);
  } catch (err) {
    out.unavailable = reason(err);
    log(`unavailable: ${out.unavailable}`);
  } finally {
    await row.cleanup();
  }
  return out;
}

const marksText = (marks) =>
  Object.entries(marks)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");

/** The rows' sections of the report. */
export function scaleMarkdown(results, table) {
  const out = [];
  const procs = (c) =>
    table(
      ["process", "n", "CPU (ms)", "peak RSS (MB)"],
      c.processes.map((p) => [p.label, p.n, p.cpuMs, p.peakRssMB]),
    );
  const s = results.submodules;
  if (s) {
    out.push("", `### Many submodules (${s.label})`, "");
    if (s.unavailable) out.push(`n/a (${s.unavailable})`);
    else {
      out.push(
        `**${s.target.met ? "met" : "MISSED"}**: ${s.target.text}. Load average before ${s.loadBefore.join("/")}, after ${s.loadAfter.join("/")}.`,
      );
      for (const [name, c] of [
        ["superproject alone", s.alone],
        [`with ${s.count} submodules`, s.full],
        ["second workspace", s.second],
      ])
        out.push("", `**${name}: ${c.ms} ms.** Progress marks (ms): ${marksText(c.marks)}.`, "", procs(c));
    }
  }
  const f = results.manyFiles;
  if (f) {
    out.push("", `### Many files (${f.label})`, "");
    if (f.unavailable) out.push(`n/a (${f.unavailable})`);
    else
      out.push(
        `**${f.target.met ? "met" : "MISSED"}**: ${f.target.text}. Load average before ${f.loadBefore.join("/")}, after ${f.loadAfter.join("/")}. Progress marks (ms): ${marksText(f.first.marks)}.`,
        "",
        procs(f.first),
      );
  }
  return out;
}
