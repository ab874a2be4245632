// `node bench/pty-start.mjs [samples]`: how fast a PTY exec starts compared with a pipes exec, on
// the test rig's real sshd, directly and through the 50 ms RTT delay proxy. Each sample is a fresh
// `node dist/cli.js exec` driven the way Paseo drives it; per mode it reports the p50 time from
// spawning the wrapper to fd4 `started`, to the first fd1 byte, and to fd4 `exit`, plus the
// `started` → `exit` gap (for /bin/echo that is pure overhead). PTY execs run on the terminal the
// host daemon owns and, forced with the agent's test hook (this machine is the host), on sshd's
// pty as on a host without python3 and util-linux script. Run `npm run build` first.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startDelayProxy } from "./delay-proxy.mjs";
import { startRig } from "./rig.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const CLI = join(ROOT, "dist", "cli.js");
const RID = "be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be00";
const N = Number(process.argv[2] ?? 9);
const TIMEOUT_MS = 60_000;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function run(cmd, args, { input, cwd } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.stdin.end(input ?? "");
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(" ")}: ${err.trim()}`))));
  });
}

/** One exec as Paseo runs it; resolves the times (ms since spawn) of started, first output, exit. */
function execOnce(options, workspaceId, argv, stdio, beforeStart) {
  return new Promise((resolve, reject) => {
    const execId = randomBytes(16).toString("hex");
    beforeStart?.(execId);
    const t0 = performance.now();
    const child = spawn(process.execPath, [CLI, "exec", "--workspace-id", workspaceId], {
      stdio: ["pipe", "pipe", "pipe", "pipe", "pipe"],
      detached: true,
    });
    const t = { started: NaN, output: NaN, exit: NaN };
    let fd4 = "";
    let stderr = "";
    child.stdout.on("data", () => {
      if (Number.isNaN(t.output)) t.output = performance.now() - t0;
    });
    child.stderr.on("data", (d) => (stderr += d));
    const envelope = {
      type: "spawn",
      protocolVersion: 1,
      runtimeInstanceId: RID,
      argv,
      env: { PATH: "/usr/bin:/bin" },
      purpose: { kind: "workspace-script" },
      options,
      execId,
      stdio,
    };
    child.stdio[3].on("error", () => undefined);
    child.stdio[3].write(`${JSON.stringify(envelope)}\n`);
    if (stdio.kind === "pipes") child.stdio[3].end();
    child.stdin.on("error", () => undefined);
    if (stdio.kind === "pipes") child.stdin.end();
    const timer = setTimeout(() => {
      process.kill(-child.pid, "SIGKILL");
      reject(new Error(`exec timed out: ${stderr}`));
    }, TIMEOUT_MS);
    child.stdio[4].on("data", (d) => {
      fd4 += d;
      for (const line of fd4.split("\n").slice(0, -1)) {
        const ev = JSON.parse(line);
        if (ev.type === "started" && Number.isNaN(t.started)) t.started = performance.now() - t0;
        if (ev.type === "exit" && Number.isNaN(t.exit)) t.exit = performance.now() - t0;
      }
    });
    child.on("close", () => {
      clearTimeout(timer);
      child.stdio[3].destroy();
      if (Number.isNaN(t.exit)) return reject(new Error(`no fd4 exit: ${stderr.trim()}`));
      resolve(t);
    });
  });
}

async function measure(label, options, workspaceId, stdio, beforeStart) {
  await execOnce(options, workspaceId, ["/bin/echo", "hi"], stdio, beforeStart); // warm
  const samples = [];
  for (let i = 0; i < N; i++) samples.push(await execOnce(options, workspaceId, ["/bin/echo", "hi"], stdio, beforeStart));
  const p = (k) => Math.round(median(samples.map((s) => s[k])));
  const gap = Math.round(median(samples.map((s) => s.exit - s.started)));
  return { label, started: p("started"), output: p("output"), exit: p("exit"), startedToExit: gap };
}

async function main() {
  const tmp = mkdtempSync(join(tmpdir(), "paseo-pty-bench-"));
  const rig = await startRig();
  const proxy = await startDelayProxy({ targetPort: rig.info.port, delayMs: 25, maxLifetimeMs: 30 * 60_000 });
  const rows = [];
  try {
    const info = rig.info;
    const knownHostsFile = join(tmp, "known_hosts");
    const keys = info.hostPublicKeys.map((k) => k.split(" ").slice(0, 2).join(" "));
    writeFileSync(knownHostsFile, [info.port, proxy.port].flatMap((p) => keys.map((k) => `[127.0.0.1]:${p} ${k}`)).join("\n") + "\n");
    const repo = join(tmp, "repo");
    mkdirSync(repo);
    writeFileSync(join(repo, "README"), "pty bench\n");
    await run("sh", ["-c", "git init -q -b main . && git add -A && git -c user.name=b -c user.email=b@example.invalid commit -qm init"], {
      cwd: repo,
    });
    for (const [name, port] of [
      ["direct", info.port],
      ["50ms RTT", proxy.port],
    ]) {
      const options = {
        host: "127.0.0.1",
        port,
        user: info.user,
        identityFile: info.identityFile,
        knownHostsFile,
        root: `~/.paseo-ssh-test-${info.runId}-ptybench-${port}`,
      };
      const workspaceId = `ptybench-${port}`;
      const input = {
        workspaceId,
        project: { projectId: "pty-bench", source: { kind: "directory", path: repo } },
        placement: { kind: "existing" },
      };
      await run(process.execPath, [CLI, "create", "--workspace-id", workspaceId], {
        input: `${JSON.stringify({ protocolVersion: 1, runtimeInstanceId: RID, input, options })}\n`,
      });
      process.stderr.write(`[${name}] pipes\n`);
      rows.push({ net: name, ...(await measure("pipes /bin/echo hi", options, workspaceId, { kind: "pipes" })) });
      process.stderr.write(`[${name}] pty\n`);
      const pty = { kind: "pty", rows: 24, cols: 80 };
      rows.push({ net: name, ...(await measure("pty 80x24 /bin/echo hi", options, workspaceId, pty)) });
      process.stderr.write(`[${name}] pty on sshd's pty\n`);
      // The agent's test hook (src/remote-agent/test-hooks.ts): this exec finds no way to own a terminal.
      const hooks = join(info.remoteHome, options.root.slice(2), "test-hooks.json");
      const hide = (execId) => writeFileSync(hooks, JSON.stringify({ execs: { [execId]: { terminalSearchPath: "" } } }), { mode: 0o644 });
      rows.push({ net: name, ...(await measure("pty 80x24 /bin/echo hi, sshd's pty", options, workspaceId, pty, hide)) });
      await run(process.execPath, [CLI, "destroy", "--workspace-id", workspaceId], {
        input: `${JSON.stringify({ protocolVersion: 1, runtimeInstanceId: RID, options })}\n`,
      });
    }
  } finally {
    await proxy.close();
    await rig.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
  console.log(
    `p50 of ${N} fresh wrapper processes each (ms since the wrapper was spawned); ${cpus().length} CPUs, load ${loadavg()
      .map((x) => x.toFixed(2))
      .join("/")}`,
  );
  console.log("| network | exec | started | first output | exit | started→exit |");
  console.log("|---|---|---:|---:|---:|---:|");
  for (const r of rows) console.log(`| ${r.net} | ${r.label} | ${r.started} | ${r.output} | ${r.exit} | ${r.startedToExit} |`);
}

await main();
