// `npm run bench`: the runtime against its targets, on the test rig's real sshd, directly and
// through a delay proxy (50 ms RTT), every reference measured in the same run. Every runtime op is
// a fresh `node dist/cli.js …` process driven the way Paseo drives it. Prints every target with its
// measured ratio and met / missed, writes bench/results/latest.json and (full runs) the generated
// block of bench/RESULTS.md. Everything it starts (sshd, proxies, brokers, host processes, remote
// roots, temp files) is removed at the end, on Ctrl-C and on its own time limit.
//
//   node bench/run.mjs [--quick] [--only=create,exec,signal,rss,profile,big,pool,submodules,files,mirror,ports] [--write]
//
// --quick (or BENCH_QUICK=1): fewer samples, creates and the 100 live execs at 50 ms RTT only, a
// 512 MiB large object instead of 1.5 GiB (BENCH_BIG_MB sets its size in any run), 200 submodules
// instead of 1,000 (BENCH_SUBMODULES), 50,000 files instead of 200,000 (BENCH_FILES; the big file
// beside them: BENCH_FILES_BIG_MB, 300 MiB), forwarded-port downloads of 20 MB instead of 100
// (BENCH_PORTS_MB; BENCH_PORTS_IDLE: how many idle workspaces the daemon's CPU row holds, 50).
// --only: just those groups. --write: also rewrite RESULTS.md after a quick or partial run.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startRig } from "./rig.mjs";
import { startProxy } from "./proxy-process.mjs";
import { brokers, cmdline, descendants, hostProcesses, stat, terminate } from "./procs.mjs";
import { git, looseFixture, realisticLabel, realisticRepo } from "./repos.mjs";
import { killChild, liveChildren, runCommand, runtime, stopSpawning } from "./runtime-driver.mjs";
import { median, stats } from "./sampling.mjs";
import { benchNetwork } from "./network.mjs";
import { evaluate } from "./targets.mjs";
import { markdown, summary, writeResults } from "./report.mjs";
import { benchBigFile } from "./big-file.mjs";
import { benchMirror } from "./mirror.mjs";
import { benchPorts } from "./ports.mjs";
import { benchManyFiles, benchSubmodules } from "./scale.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const GROUPS = ["create", "exec", "signal", "rss", "profile", "big", "pool", "submodules", "files", "mirror", "ports"];
/** Whole-bench guard: nothing here may hang a terminal or a CI job. */
const BENCH_LIMIT_MS = 30 * 60_000;
const DELAY_MS = 25;

function parseArgs(argv) {
  const quick = argv.includes("--quick") || process.env.BENCH_QUICK === "1";
  const only = argv.find((a) => a.startsWith("--only="));
  const groups = new Set(only ? only.slice(7).split(",") : GROUPS);
  for (const g of groups) if (!GROUPS.includes(g)) throw new Error(`unknown group ${g}; groups: ${GROUPS.join(", ")}`);
  const partial = quick || Boolean(only);
  return {
    mode: quick ? "quick" : only ? `partial (${[...groups].join(", ")})` : "full",
    write: !partial || argv.includes("--write"),
    groups,
    rounds: quick ? 5 : 15,
    sshSamples: quick ? 5 : 9,
    freshSamples: quick ? 3 : 5,
    signalSamples: quick ? 3 : 7,
    profileSamples: quick ? 3 : 7,
    createSamples: quick ? 1 : 3,
    liveExecs: 100,
    portsMb: Number(process.env.BENCH_PORTS_MB) || (quick ? 20 : 100),
    portsIdle: Number(process.env.BENCH_PORTS_IDLE) || 50,
    onlyRtt50: quick ? { create: true, rss: true } : {},
  };
}

const log = (s) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);

/** TCP round trip through `port` to `echo` (1 byte each way), p50 of n after 2 warm-ups. */
async function measureRtt(port, n) {
  const sock = connect({ host: "127.0.0.1", port, noDelay: true });
  await new Promise((r, j) => sock.once("connect", r).once("error", j));
  const values = [];
  for (let i = 0; i < n + 2; i++) {
    const t0 = performance.now();
    await new Promise((resolve) => {
      sock.once("data", resolve);
      sock.write("x");
    });
    if (i >= 2) values.push(performance.now() - t0);
  }
  sock.destroy();
  return stats("RTT", values);
}

function echoServer() {
  return new Promise((resolve) => {
    const server = createServer({ noDelay: true }, (s) => s.on("data", (d) => s.write(d)).on("error", () => undefined));
    server.listen(0, "127.0.0.1", () => resolve(server));
  });
}

/** Idle RSS (MB) of node with `code` evaluated: what any node broker costs before doing anything. */
async function idleRss(code) {
  const script = `${code}; setTimeout(() => console.log(process.memoryUsage().rss), 300)`;
  const r = await runCommand(process.execPath, ["-e", script], { cwd: ROOT });
  return r.code === 0 ? +(Number(r.stdout.trim()) / 1048576).toFixed(1) : null;
}

const version = async (cmd, args, pick) => {
  const r = await runCommand(cmd, args).catch(() => null);
  return r ? pick(r).trim().split("\n")[0] : `${cmd}: unknown`;
};

async function main() {
  const plan = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const tmp = mkdtempSync(join(tmpdir(), "paseo-bench-"));
  const cleanups = [];
  let cleaning = null;
  const cleanup = () =>
    (cleaning ??= (async () => {
      log("cleaning up: runtime processes, brokers, host processes, proxies, sshd, remote roots, temp files");
      stopSpawning();
      for (const c of liveChildren) killChild(c);
      for (const f of cleanups.reverse()) {
        try {
          await f();
        } catch (err) {
          log(`cleanup: ${err.message}`);
        }
      }
      rmSync(tmp, { recursive: true, force: true });
    })());
  const abort = (why, code) => {
    log(`${why}: cleaning up`);
    void cleanup().finally(() => process.exit(code));
  };
  process.on("SIGINT", () => abort("interrupted", 130));
  process.on("SIGTERM", () => abort("terminated", 143));
  setTimeout(() => abort(`bench exceeded ${BENCH_LIMIT_MS / 60_000} min`, 1), BENCH_LIMIT_MS).unref();

  const loadSamples = [loadavg()[0]];
  const loadTimer = setInterval(() => loadSamples.push(loadavg()[0]), 5000);
  loadTimer.unref();
  const loadStart = loadavg().map((x) => +x.toFixed(2));

  try {
    log(`${plan.mode} run; starting the rig's sshd`);
    const rigHandle = await startRig();
    const rig = rigHandle.info;
    // Last out: the rig's teardown stops sshd and removes this run's remote roots.
    cleanups.push(() => rigHandle.stop());
    const rootMark = `.paseo-ssh-test-${rig.runId}`;
    cleanups.push(async () => {
      await terminate(brokers(tmp));
      await terminate(hostProcesses(null, rootMark).pids);
    });
    const sshdPid = descendants(process.pid).find((pid) => stat(pid)?.comm === "sshd" && cmdline(pid).includes(rig.tmpDir)) ?? null;

    const proxy = await startProxy(rig.port, DELAY_MS, BENCH_LIMIT_MS);
    cleanups.push(() => proxy.stop());
    const echo = await echoServer();
    cleanups.push(() => new Promise((r) => echo.close(r)));
    const echoProxy = await startProxy(echo.address().port, DELAY_MS, BENCH_LIMIT_MS);
    cleanups.push(() => echoProxy.stop());

    const knownHostsFile = join(tmp, "known_hosts");
    const keys = rig.hostPublicKeys.map((k) => k.split(" ").slice(0, 2).join(" "));
    writeFileSync(knownHostsFile, [rig.port, proxy.port].flatMap((p) => keys.map((k) => `[127.0.0.1]:${p} ${k}`)).join("\n") + "\n");
    const sshBase = ["-i", rig.identityFile, "-o", `UserKnownHostsFile=${knownHostsFile}`, "-o", "StrictHostKeyChecking=yes"];
    sshBase.push("-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", `${rig.user}@127.0.0.1`);

    const repos = {};
    const tiny = join(tmp, "tiny");
    mkdirSync(tiny);
    writeFileSync(join(tiny, "README"), "bench\n");
    await git(["init", "-q", "-b", "main", "."], { cwd: tiny });
    await git(["add", "-A"], { cwd: tiny });
    await git(["-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q", "-m", "init"], { cwd: tiny });
    repos.tiny = { id: "tiny", path: tiny, label: "one file" };
    if (plan.groups.has("create")) {
      log("generating the 5,000-file fixture");
      const f = await looseFixture(join(tmp, "fixture"));
      repos.fixture = { id: "fixture", path: f.path, label: f.label };
      const r = await realisticRepo(join(ROOT, "bench", "results", "cache"), log);
      repos.realistic = { id: "realistic", path: r.path, label: realisticLabel(r) };
    }

    const rt = runtime({ root: ROOT, tmp });
    const ctx = { rt, rig, plan, tmp, sshdPid, sshBase, knownHostsFile, repos, log };
    const results = {
      when: new Date().toISOString(),
      mode: plan.mode,
      plan: { rounds: plan.rounds, liveExecs: plan.liveExecs, createSamples: plan.createSamples },
      node: process.version,
      git: await version("git", ["--version"], (r) => r.stdout),
      ssh: await version("ssh", ["-V"], (r) => r.stderr),
      cpus: cpus().length,
      repos: { fixture: repos.fixture?.label, realistic: repos.realistic?.label },
      memoryFloor: {
        node: await idleRss("0"),
        ssh2: await idleRss("require('ssh2')"),
        ssh2Zod: await idleRss("require('ssh2'); require('zod')"),
      },
      networks: {},
    };
    for (const net of [
      { key: "direct", name: "direct", port: rig.port, rttPort: echo.address().port, delayMs: 0 },
      { key: "rtt50", name: "50 ms RTT", port: proxy.port, rttPort: echoProxy.port, delayMs: DELAY_MS },
    ]) {
      const rtt = await measureRtt(net.rttPort, 20);
      log(`[${net.name}] RTT p50 ${rtt.p50.toFixed(2)} ms`);
      const res = await benchNetwork(ctx, { ...net, rttMs: rtt.p50 });
      res.rows.rtt = rtt;
      res.targets = evaluate(res);
      results.networks[net.key] = res;
      if (plan.groups.has("mirror")) (results.mirror ??= []).push(await benchMirror(ctx, { ...net, rttMs: rtt.p50 }));
      if (plan.groups.has("ports")) (results.ports ??= []).push(await benchPorts(ctx, { ...net, rttMs: rtt.p50 }));
    }

    if (plan.groups.has("big")) {
      const sizeMb = Number(process.env.BENCH_BIG_MB) || (plan.mode === "quick" ? 512 : 1536);
      results.bigFile = await benchBigFile(ctx, { cacheDir: join(ROOT, "bench", "results", "cache"), sizeMb });
    }
    if (plan.groups.has("submodules")) {
      const count = Number(process.env.BENCH_SUBMODULES) || (plan.mode === "quick" ? 200 : 1000);
      results.submodules = await benchSubmodules(ctx, { count });
    }
    if (plan.groups.has("files")) {
      const files = Number(process.env.BENCH_FILES) || (plan.mode === "quick" ? 50_000 : 200_000);
      const bigMb = Number(process.env.BENCH_FILES_BIG_MB ?? 300);
      results.manyFiles = await benchManyFiles(ctx, { cacheDir: join(ROOT, "bench", "results", "cache"), files, bigMb });
    }

    clearInterval(loadTimer);
    loadSamples.push(loadavg()[0]);
    results.load = {
      start: loadStart,
      end: loadavg().map((x) => +x.toFixed(2)),
      during: {
        min: Math.min(...loadSamples).toFixed(2),
        median: median(loadSamples).toFixed(2),
        max: Math.max(...loadSamples).toFixed(2),
      },
    };
    results.minutes = ((Date.now() - started) / 60_000).toFixed(1);
    mkdirSync(join(ROOT, "bench", "results"), { recursive: true });
    const jsonFile = join(ROOT, "bench", "results", plan.write ? "latest.json" : "latest-partial.json");
    writeFileSync(jsonFile, JSON.stringify(results, null, 2));
    const md = markdown(results);
    console.log(`\n${md}\n`);
    console.log(summary(results));
    if (plan.write) writeResults(join(ROOT, "bench", "RESULTS.md"), md);
    console.log(
      `\nJSON: ${jsonFile}${plan.write ? "; bench/RESULTS.md rewritten" : " (RESULTS.md left as it was: pass --write to rewrite it)"}`,
    );
  } finally {
    await cleanup();
  }
}

await main();
