// The 200-host pool row (issue 30 item 10, docs/pool.md "Large pools"): status and create over a
// `hosts` list of 200 entries, each a TCP relay on its own port in front of the rig's one sshd (one
// root, so one agent install: what is measured is the fan-out, not 200 uploads). Reports the time,
// the peak RSS of the runtime's processes (the operation plus every broker) and the brokers alive
// after. Run alone on a quiet machine: `node bench/pool-200.mjs [hosts]` (after `npm run build`).
import { createServer, connect } from "node:net";
import { execFileSync } from "node:child_process";
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startRig } from "./rig.mjs";
import { RUNTIME_INSTANCE_ID, runCommand } from "./runtime-driver.mjs";
import { shutdownBrokers } from "./broker-shutdown.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const CLI = join(ROOT, "dist", "cli.js");
const HOSTS = Number(process.argv[2] ?? 200);

function relay(port) {
  const server = createServer((client) => {
    const upstream = connect(port, "127.0.0.1");
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** RSS (kB) of the runtime's processes now: operations (dist/cli.js) and brokers (dist/broker.js). */
function runtimeRssKb() {
  const out = execFileSync("ps", ["-eo", "rss=,args="], { encoding: "utf8" });
  return out
    .split("\n")
    .filter((l) => l.includes(CLI) || l.includes(join(ROOT, "dist", "broker.js")))
    .reduce((sum, l) => sum + Number(l.trim().split(/\s+/)[0] || 0), 0);
}

async function measured(label, run) {
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, runtimeRssKb())), 250);
  const t0 = performance.now();
  const r = await run();
  const ms = performance.now() - t0;
  clearInterval(sampler);
  peak = Math.max(peak, runtimeRssKb());
  if (r.code !== 0 && r.code !== null) console.error(`${label}: exit ${r.code}: ${r.stderr.trim().split("\n").pop()}`);
  return { label, ms: Math.round(ms), peakMb: Math.round(peak / 1024), code: r.code };
}

const rig = await startRig();
const tmp = mkdtempSync(join(tmpdir(), "paseo-bench-pool200-"));
const servers = [];
try {
  const info = rig.info;
  for (let i = 0; i < HOSTS; i++) servers.push(await relay(info.port));
  const knownHosts = join(tmp, "known_hosts");
  const keys = info.hostPublicKeys.map((k) => k.split(" ").slice(0, 2).join(" "));
  writeFileSync(knownHosts, "");
  for (const s of servers) appendFileSync(knownHosts, keys.map((k) => `[127.0.0.1]:${s.address().port} ${k}\n`).join(""));
  const options = {
    user: info.user,
    identityFile: info.identityFile,
    knownHostsFile: knownHosts,
    root: "~/bench-pool200",
    connectTimeoutMs: 10_000,
    hosts: servers.map((s) => ({ host: "127.0.0.1", port: s.address().port })),
  };
  const repo = join(tmp, "repo");
  execFileSync("git", ["init", "-q", "-b", "main", repo]);
  writeFileSync(join(repo, "a.txt"), "a\n");
  execFileSync("git", ["-C", repo, "add", "."]);
  execFileSync("git", ["-C", repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "a"]);
  const env = { ...process.env, TMPDIR: tmp };
  delete env.XDG_RUNTIME_DIR;
  const brokerDir = join(tmp, `paseo-ssh-${process.getuid()}`);
  const brokers = () => (existsSync(brokerDir) ? readdirSync(brokerDir).filter((n) => n.endsWith(".sock")).length : 0);
  const status = () => runCommand(process.execPath, [CLI, "status", "--options", JSON.stringify(options), "--json", "true"], { env });
  const lifecycle = (op, id, extra = {}) =>
    runCommand(process.execPath, [CLI, op, "--workspace-id", id], {
      env,
      input: `${JSON.stringify({ protocolVersion: 1, runtimeInstanceId: RUNTIME_INSTANCE_ID, ...extra, options })}\n`,
    });
  const rows = [];
  rows.push({ ...(await measured(`status, ${HOSTS} hosts, no broker running`, status)), brokers: brokers() });
  rows.push({ ...(await measured(`status, ${HOSTS} hosts, again`, status)), brokers: brokers() });
  for (const n of [1, 2]) {
    const id = `bench-pool200-${n}`;
    const input = {
      workspaceId: id,
      project: { projectId: "bench", source: { kind: "directory", path: repo } },
      placement: { kind: "existing" },
    };
    rows.push({ ...(await measured(`create ${n}, ${HOSTS} hosts`, () => lifecycle("create", id, { input }))), brokers: brokers() });
    await lifecycle("destroy", id);
  }
  console.log(`| row | ms | peak RSS of runtime processes (MB) | brokers alive after |`);
  console.log(`|---|---|---|---|`);
  for (const r of rows) console.log(`| ${r.label}${r.code === 0 ? "" : ` (exit ${r.code})`} | ${r.ms} | ${r.peakMb} | ${r.brokers} |`);
} finally {
  for (const err of await shutdownBrokers(tmp)) console.error(`broker shutdown: ${err}`);
  for (const s of servers) s.close();
  rmSync(tmp, { recursive: true, force: true });
  await rig.stop();
}
