// `npm run bench`: the runtime against OpenSSH on the test rig's real sshd, directly and through a
// delay proxy (50 ms RTT). Every runtime op is a fresh `node dist/cli.js …` process driven the way
// Paseo drives it (exec: 5 pipes, fd3 envelope, timed until fd4 `exit`). Prints a terminal table,
// writes bench/results/latest.json and prints a Markdown table for the README. An op that fails is
// reported as "unavailable: <reason>", never estimated.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startDelayProxy } from "./delay-proxy.mjs";
import { startRig } from "./rig.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const CLI = join(ROOT, "dist", "cli.js");
const RID = "be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be00";
const N = { exec: 9, fresh: 5, signal: 5, stat: 7 };
/** Whole-bench guard: nothing here may hang the terminal. */
const BENCH_LIMIT_MS = 15 * 60_000;
const OP_TIMEOUT_MS = 120_000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const firstLine = (s) => String(s).trim().split("\n").filter(Boolean).slice(-1)[0]?.slice(0, 200) ?? "no output";

/** Runs a child to completion; resolves { code, stdout, stderr, ms }. */
function run(cmd, args, { input, env, stdio, cwd } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { cwd, env: env ?? process.env, stdio: stdio ?? ["pipe", "pipe", "pipe"] });
    const out = [];
    const err = [];
    child.stdout?.on("data", (d) => out.push(d));
    child.stderr?.on("data", (d) => err.push(d));
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(input ?? "");
    const timer = setTimeout(() => child.kill("SIGKILL"), OP_TIMEOUT_MS);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString(), ms: performance.now() - t0 });
    });
  });
}

function lifecycleRequest(options, extra = {}) {
  return `${JSON.stringify({ protocolVersion: 1, runtimeInstanceId: RID, ...extra, options })}\n`;
}

function envelope(options, argv, execId, purpose = "workspace-script") {
  return `${JSON.stringify({
    type: "spawn",
    protocolVersion: 1,
    runtimeInstanceId: RID,
    argv,
    env: purpose === "workspace-helper" ? {} : { PATH: "/usr/local/bin:/usr/bin:/bin" },
    purpose: { kind: purpose },
    options,
    execId,
    stdio: { kind: "pipes" },
  })}\n`;
}

/**
 * One exec the way Paseo runs it. Resolves when fd4 carried `exit` (the time Paseo can report the
 * result) with the events seen; `onStarted` fires at `started`.
 */
function execOnce(options, workspaceId, argv, { purpose, env, onStarted } = {}) {
  return new Promise((resolve, reject) => {
    const execId = randomBytes(16).toString("hex");
    const t0 = performance.now();
    const child = spawn(process.execPath, [CLI, "exec", "--workspace-id", workspaceId], {
      stdio: ["pipe", "pipe", "pipe", "pipe", "pipe"],
      detached: true,
      env: env ?? process.env,
    });
    let fd4 = "";
    let stderr = "";
    let stdout = "";
    let exitEvent = null;
    let ms = 0;
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.stdio[3].on("error", () => undefined);
    child.stdio[3].end(envelope(options, argv, execId, purpose));
    child.stdin.on("error", () => undefined);
    child.stdin.end();
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
      reject(new Error(`exec timed out; stderr: ${firstLine(stderr)}`));
    }, OP_TIMEOUT_MS);
    child.stdio[4].on("data", (d) => {
      fd4 += d;
      for (const line of fd4.split("\n").slice(0, -1)) {
        const ev = JSON.parse(line);
        if (ev.type === "started" && onStarted) {
          const cb = onStarted;
          onStarted = undefined;
          cb(execId);
        }
        if (ev.type === "exit" && !exitEvent) {
          exitEvent = ev;
          ms = performance.now() - t0;
        }
        if (ev.type === "error") exitEvent = exitEvent ?? { error: ev.message };
      }
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      if (!exitEvent || exitEvent.error)
        return reject(new Error(exitEvent?.error ?? `no fd4 exit (wrapper exit ${code}): ${firstLine(stderr)}`));
      resolve({ ms, exit: exitEvent, stdout, stderr });
    });
  });
}

/** Runs `fn` n times after `warm` unmeasured runs; a failure makes the row unavailable. */
async function sample(label, n, fn, warm = 1) {
  try {
    for (let i = 0; i < warm; i++) await fn();
    const ms = [];
    for (let i = 0; i < n; i++) ms.push(await fn());
    return { label, n, p50: median(ms), min: Math.min(...ms), max: Math.max(...ms), samples: ms.map((x) => Math.round(x)) };
  } catch (err) {
    return { label, unavailable: firstLine(err.message) };
  }
}

function makeRepo(dir, files = 5000, bytesPerFile = 8000) {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < files; i++) {
    const sub = join(dir, "src", `d${String(i % 50).padStart(2, "0")}`);
    if (i < 50) mkdirSync(sub, { recursive: true });
    // Base64 of random bytes: source-like text that does not compress away.
    writeFileSync(join(sub, `f${i}.txt`), randomBytes((bytesPerFile * 3) / 4).toString("base64"));
  }
  // Always inside the generated directory: a git command that ran in the caller's checkout would
  // commit whatever is there.
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("GIT_")) delete env[k];
  const script = "git init -q -b main . && git add -A && git -c user.name=bench -c user.email=bench@example.invalid commit -q -m init";
  return run("sh", ["-c", script], { cwd: dir, env }).then((r) => {
    if (r.code !== 0) throw new Error(`git init failed: ${r.stderr}`);
  });
}

async function gitIn(repo, script) {
  const r = await run("sh", ["-c", `cd '${repo}' && ${script}`]);
  if (r.code !== 0) throw new Error(`${script}: ${firstLine(r.stderr)}`);
  return r.stdout;
}

async function benchNetwork(name, net, rigInfo, repo, sshBase) {
  const options = {
    host: "127.0.0.1",
    port: net.port,
    user: rigInfo.user,
    identityFile: rigInfo.identityFile,
    knownHostsFile: net.knownHostsFile,
    root: `~/.paseo-ssh-test-${rigInfo.runId}-bench-${name}`,
  };
  const ssh = (...args) => ["-p", String(net.port), ...sshBase, ...args];
  const rows = {};
  const ws = (i) => `bench-${name}-${i}`;
  const create = async (i, opts = options, env = process.env) => {
    const input = {
      workspaceId: ws(i),
      project: { projectId: "bench-project", source: { kind: "directory", path: repo } },
      placement: { kind: "existing" },
    };
    const r = await run(process.execPath, [CLI, "create", "--workspace-id", ws(i)], { input: lifecycleRequest(opts, { input }), env });
    if (r.code !== 0) throw new Error(firstLine(r.stderr));
    return r.ms;
  };
  // The same first create in-process, into a root of its own (cold cache), to show what the broker adds.
  const noBrokerOptions = { ...options, root: `${options.root}-nobroker` };
  const log = (s) => process.stderr.write(`[${name}] ${s}\n`);

  log("create (first workspace)");
  rows.createFirst = await sample("create, first workspace (5,000 files, ~40 MB)", 1, () => create(1), 0);
  log("create (first workspace) without broker");
  rows.createFirstNoBroker = await sample(
    "create, first workspace, PASEO_SSH_NO_BROKER=1",
    1,
    () => create(1, noBrokerOptions, { ...process.env, PASEO_SSH_NO_BROKER: "1" }),
    0,
  );
  await run(process.execPath, [CLI, "destroy", "--workspace-id", ws(1)], {
    input: lifecycleRequest(noBrokerOptions),
    env: { ...process.env, PASEO_SSH_NO_BROKER: "1" },
  });
  log("git archive | ssh tar -x");
  let archiveRun = 0;
  rows.gitArchive = await sample(
    "git archive HEAD \\| ssh host tar -x",
    1,
    async () => {
      const dir = `.paseo-bench-archive-${rigInfo.runId}-${name}-${archiveRun++}`;
      const cmd = `git -C '${repo}' archive HEAD | ssh ${ssh()
        .map((a) => `'${a}'`)
        .join(" ")} 'mkdir -p ${dir} && tar -x -C ${dir}'`;
      const r = await run("sh", ["-c", cmd]);
      if (r.code !== 0) throw new Error(firstLine(r.stderr));
      await run("ssh", ssh(`rm -rf ${dir}`));
      return r.ms;
    },
    0,
  );
  log("create (second workspace, same repo)");
  rows.createSecond = await sample("create, second workspace of the same repo", 1, () => create(2), 0);
  log("create after a one-file commit");
  rows.createAfterCommit = await sample(
    "create after a one-file commit",
    1,
    async () => {
      await gitIn(
        repo,
        `echo change-${Date.now()} >> src/d00/f0.txt && git -c user.name=bench -c user.email=bench@example.invalid commit -qam one-file`,
      );
      return create(3);
    },
    0,
  );

  const wsReady = !rows.createFirst.unavailable;
  const noWs = (label) => ({ label, unavailable: `no workspace (create failed: ${rows.createFirst.unavailable})` });
  const logins = () => (rigInfo.sshdLog ? (readFileSync(rigInfo.sshdLog, "utf8").match(/Accepted publickey/g) ?? []).length : NaN);

  log("describe (process start floor)");
  rows.describe = await sample("describe: a runtime process doing no remote work", N.exec, async () => {
    const r = await run(process.execPath, [CLI, "describe"]);
    if (r.code !== 0) throw new Error(firstLine(r.stderr));
    return r.ms;
  });
  log("exec /bin/true");
  const loginsBefore = logins();
  rows.exec = wsReady
    ? await sample("exec /bin/true (runtime, fd4 exit)", N.exec, async () => (await execOnce(options, ws(1), ["/bin/true"])).ms)
    : noWs("exec /bin/true");
  if (!rows.exec.unavailable) rows.exec.sshdLogins = logins() - loginsBefore;
  log("exec /bin/true without broker");
  rows.execNoBroker = wsReady
    ? await sample(
        "exec /bin/true, PASEO_SSH_NO_BROKER=1",
        N.exec,
        async () => (await execOnce(options, ws(1), ["/bin/true"], { env: { ...process.env, PASEO_SSH_NO_BROKER: "1" } })).ms,
      )
    : noWs("exec /bin/true, no broker");

  log("OpenSSH ControlMaster");
  const controlPath = join(net.tmp, `cm-${name}`);
  const cm = ["-o", "ControlMaster=auto", "-o", `ControlPath=${controlPath}`, "-o", "ControlPersist=60"];
  rows.controlMaster = await sample("ssh host true, warm ControlMaster", N.exec, async () => {
    const r = await run("ssh", ssh(...cm, "true"));
    if (r.code !== 0) throw new Error(firstLine(r.stderr));
    return r.ms;
  });
  await run("ssh", ssh("-o", `ControlPath=${controlPath}`, "-O", "exit"));
  log("fresh ssh");
  rows.freshSsh = await sample(
    "ssh host true, fresh connection",
    N.fresh,
    async () => {
      const r = await run("ssh", ssh("true"));
      if (r.code !== 0) throw new Error(firstLine(r.stderr));
      return r.ms;
    },
    0,
  );

  log("signal");
  rows.signal = wsReady
    ? await sample("signal SIGKILL of a running exec", N.signal, async () => {
        let signalled;
        const ex = execOnce(options, ws(1), ["sleep", "30"], {
          onStarted: (execId) => {
            signalled = run(process.execPath, [CLI, "signal", "--workspace-id", ws(1), "--exec-id", execId, "--signal", "SIGKILL"], {
              input: lifecycleRequest(options),
            });
          },
        });
        await ex.catch(() => undefined);
        const r = await signalled;
        if (!r) throw new Error("exec never started");
        if (r.code !== 0) throw new Error(`signal exit ${r.code}: ${firstLine(r.stderr)}`);
        return r.ms;
      })
    : noWs("signal");

  log("helper fs-stat");
  rows.fsStat = wsReady
    ? await sample("helper fs-stat through exec", N.stat, async () => {
        const r = await execOnce(options, ws(1), ["paseo-workspace-helper", "fs-stat", "--path", "."], { purpose: "workspace-helper" });
        if (r.exit.code !== 0) throw new Error(`fs-stat exit ${r.exit.code}: ${firstLine(r.stderr)}`);
        return r.ms;
      })
    : noWs("helper fs-stat");

  for (let i = 1; i <= 3; i++) await run(process.execPath, [CLI, "destroy", "--workspace-id", ws(i)], { input: lifecycleRequest(options) });
  return rows;
}

const fmt = (r) => (r.unavailable ? `unavailable: ${r.unavailable}` : `${Math.round(r.p50)} ms`);
const ratio = (a, b) => (a.unavailable || b.unavailable ? null : a.p50 / b.p50);

function targets(rows) {
  const t = (name, value, limit, what) => ({ name, value, limit, met: value === null ? null : value <= limit, what });
  return [
    t("exec / ControlMaster", ratio(rows.exec, rows.controlMaster), 1.0, "exec p50 ≤ 1.0 × OpenSSH ControlMaster"),
    t("exec / fresh ssh", ratio(rows.exec, rows.freshSsh), 0.3, "exec p50 ≤ 0.3 × fresh ssh"),
    t("signal p50 (ms)", rows.signal.unavailable ? null : rows.signal.p50, 400, "signal p50 ≤ 400 ms"),
    t("create / git archive", ratio(rows.createFirst, rows.gitArchive), 1.2, "first create ≤ 1.2 × git archive \\| ssh tar"),
    t("second / first create", ratio(rows.createSecond, rows.createFirst), 0.2, "second workspace ≤ 0.2 × first"),
  ];
}

function markdown(results) {
  const nets = Object.keys(results.networks);
  const keys = Object.keys(results.networks[nets[0]].rows);
  const lines = [`| operation | ${nets.join(" | ")} |`, `|---|${nets.map(() => "---:").join("|")}|`];
  for (const k of keys)
    lines.push(`| ${results.networks[nets[0]].rows[k].label} | ${nets.map((n) => fmt(results.networks[n].rows[k])).join(" | ")} |`);
  lines.push("", `| target (${nets[nets.length - 1]}) | measured | met |`, "|---|---:|---|");
  for (const t of results.networks[nets[nets.length - 1]].targets) {
    lines.push(`| ${t.what} | ${t.value === null ? "n/a" : t.value.toFixed(2)} | ${t.met === null ? "n/a" : t.met ? "yes" : "**no**"} |`);
  }
  return lines.join("\n");
}

/** Replaces the generated part of bench/RESULTS.md, keeping the hand-written notes around it. */
function writeResults(generated) {
  const file = join(ROOT, "bench", "RESULTS.md");
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

async function main() {
  const guard = setTimeout(() => {
    process.stderr.write(`bench exceeded ${BENCH_LIMIT_MS} ms; aborting\n`);
    process.exit(1);
  }, BENCH_LIMIT_MS);
  guard.unref();
  const tmp = mkdtempSync(join(tmpdir(), "paseo-bench-"));
  const rigHandle = await startRig();
  const proxy = await startDelayProxy({ targetPort: rigHandle.info.port, delayMs: 25, maxLifetimeMs: BENCH_LIMIT_MS });
  try {
    const info = rigHandle.info;
    const knownHostsFile = join(tmp, "known_hosts");
    const keys = info.hostPublicKeys.map((k) => k.split(" ").slice(0, 2).join(" "));
    writeFileSync(knownHostsFile, [info.port, proxy.port].flatMap((p) => keys.map((k) => `[127.0.0.1]:${p} ${k}`)).join("\n") + "\n");
    const sshBase = [
      "-i",
      info.identityFile,
      "-o",
      `UserKnownHostsFile=${knownHostsFile}`,
      "-o",
      "StrictHostKeyChecking=yes",
      "-o",
      "BatchMode=yes",
      "-o",
      "IdentitiesOnly=yes",
      `${info.user}@127.0.0.1`,
    ];
    const repo = join(tmp, "repo");
    process.stderr.write("generating a 5,000-file repository\n");
    await makeRepo(repo);
    const results = {
      when: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      loadAverageAtStart: loadavg().map((x) => +x.toFixed(2)),
      networks: {},
    };
    for (const [name, net] of [
      ["direct", { port: info.port, knownHostsFile, tmp }],
      ["50ms RTT", { port: proxy.port, knownHostsFile, tmp }],
    ]) {
      const key = name === "direct" ? "direct" : "rtt50";
      const rows = await benchNetwork(key, net, info, repo, sshBase);
      results.networks[name] = { rows, targets: targets(rows) };
    }
    results.loadAverageAtEnd = loadavg().map((x) => +x.toFixed(2));
    mkdirSync(join(ROOT, "bench", "results"), { recursive: true });
    writeFileSync(join(ROOT, "bench", "results", "latest.json"), JSON.stringify(results, null, 2));
    const md = markdown(results);
    console.log("\nResults (p50 of fresh processes; JSON in bench/results/latest.json)\n");
    for (const [name, { rows }] of Object.entries(results.networks)) {
      console.log(`== ${name}`);
      for (const r of Object.values(rows))
        console.log(
          `  ${r.label.padEnd(52)} ${fmt(r)}${r.samples ? `  [${r.samples.join(", ")}]` : ""}${r.sshdLogins !== undefined ? `  (sshd logins: ${r.sshdLogins})` : ""}`,
        );
    }
    console.log(
      `\nload average (1/5/15 min) at start ${results.loadAverageAtStart.join(" ")}, at end ${results.loadAverageAtEnd.join(" ")}; ${results.cpus} CPUs, node ${results.node}`,
    );
    console.log("\nMarkdown:\n");
    console.log(md);
    const conditions = `Measured ${results.when} on ${results.cpus} CPUs, node ${results.node}, load average ${results.loadAverageAtStart.join("/")} at start and ${results.loadAverageAtEnd.join("/")} at end (1/5/15 min). Every runtime row is a fresh \`node dist/cli.js\` process as Paseo spawns it; p50 of ${N.exec} (exec), ${N.signal} (signal), ${N.stat} (fs-stat), ${N.fresh} (fresh ssh) samples; creates are single runs. 50 ms RTT = bench/delay-proxy.mjs adding 25 ms each way in front of the rig's sshd.`;
    writeResults(`${conditions}\n\n${md}`);
  } finally {
    await proxy.close();
    await rigHandle.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
