// `npm run bench:terminal`: host-owned terminals (src/remote-agent/terminal) on this machine, per
// method (python3 relay; util-linux script + our node child with python3 hidden from the probe):
// start latency, the relay's memory and throughput. Bundles the driver with the relay texts the
// way the agent build does. Prints a Markdown table; numbers are p50 where several samples.
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { bundleWithTerminal } from "../scripts/terminal-sources.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const N = 15;
const MB = 1024 * 1024;
const TOTAL = 100 * MB;

const tmp = mkdtempSync(join(tmpdir(), "paseo-terminal-bench-"));
// The driver plus the test scenarios (the 100 MiB echo is the same code the tests run).
const bundle = join(tmp, "terminal.cjs");
await bundleWithTerminal(
  ROOT,
  `export * from "./src/remote-agent/terminal/host-terminals.ts"; export { echoThrough } from "./test/terminal/scenarios.ts";`,
  bundle,
);
const { probeTerminalSupport, spawnTerminal, echoThrough } = createRequire(import.meta.url)(bundle);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const rssKb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]);
const spec = (file, args, extra = {}) => ({
  file,
  args,
  argv0: file,
  cwd: "/",
  env: { PATH: "/usr/bin:/bin" },
  rows: 24,
  cols: 80,
  ...extra,
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function latency(support) {
  const started = [];
  const firstOutput = [];
  const trueExit = [];
  for (let i = 0; i < N; i++) {
    let t0 = performance.now();
    const echo = await spawnTerminal(support, spec("/bin/echo", ["x"]));
    started.push(performance.now() - t0);
    await once(echo.output, "data");
    firstOutput.push(performance.now() - t0);
    await echo.exited;
    t0 = performance.now();
    const t = await spawnTerminal(support, spec("/bin/true", []));
    t.output.resume();
    await t.exited;
    trueExit.push(performance.now() - t0);
  }
  return { started: median(started), firstOutput: median(firstOutput), trueExit: median(trueExit) };
}

async function memory(support) {
  const t = await spawnTerminal(support, spec("/bin/sleep", ["30"]));
  await sleep(300);
  // python3: the relay. script: `script` plus our node child (which leads the terminal's session).
  const relay = rssKb(t.relayPid);
  const child = support.method === "script" ? rssKb(t.sid) : 0;
  await t.close();
  return { relay, child };
}

async function outputThroughput(support) {
  const t = await spawnTerminal(support, spec("/bin/sh", ["-c", `stty raw && exec head -c ${TOTAL} /dev/zero`]));
  const t0 = performance.now();
  let n = 0;
  t.output.on("data", (d) => (n += d.length));
  await t.exited;
  if (n !== TOTAL) throw new Error(`output: ${n} bytes, expected ${TOTAL}`);
  return TOTAL / MB / ((performance.now() - t0) / 1000);
}

async function echoThroughput(support) {
  const r = await echoThrough(support, TOTAL);
  if (r.echoedSha !== r.sentSha) throw new Error("echo differs");
  return TOTAL / MB / (r.ms / 1000);
}

/** Input written (with backpressure honoured) to a stopped workload for 5 s: what the relay side holds. */
async function unreadInput(support) {
  const t = await spawnTerminal(support, spec("/bin/sh", ["-c", "stty raw -echo && echo ready && exec cat >/dev/null"]));
  const chunk = Buffer.alloc(65536, 0x5a);
  t.output.resume();
  await sleep(200);
  t.signal("SIGSTOP");
  let accepted = 0;
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline && accepted < 256 * MB) {
    accepted += chunk.length;
    if (!t.input.write(chunk)) {
      const drained = await Promise.race([
        once(t.input, "drain").then(() => true),
        sleep(Math.max(0, deadline - Date.now())).then(() => false),
      ]);
      if (!drained) break;
    }
  }
  const relay = rssKb(t.relayPid);
  t.signal("SIGCONT");
  await t.close();
  return { acceptedMb: accepted / MB, relayKb: relay };
}

const bin = mkdtempSync(join(tmpdir(), "paseo-terminal-bench-bin-"));
symlinkSync("/usr/bin/script", join(bin, "script"));
symlinkSync("/usr/bin/stty", join(bin, "stty"));
const supports = [await probeTerminalSupport(join(tmp, "a")), await probeTerminalSupport(join(tmp, "b"), { searchPath: bin })];
const load0 = loadavg().map((x) => x.toFixed(2));
const rows = [];
for (const s of supports) {
  if (s.method === "none") throw new Error(s.reason);
  const lat = await latency(s);
  const mem = await memory(s);
  const out = await outputThroughput(s);
  const echo = await echoThroughput(s);
  const unread = await unreadInput(s);
  rows.push({ s, lat, mem, out, echo, unread });
}
const load1 = loadavg().map((x) => x.toFixed(2));
rmSync(tmp, { recursive: true, force: true });
rmSync(bin, { recursive: true, force: true });

const label = (s) => (s.method === "python3" ? `python3 ${s.version}` : "script + stty + node child");
console.log(
  `Measured ${new Date().toISOString()} on ${cpus().length} CPUs, node ${process.version}, load average ${load0.join("/")} at start, ${load1.join("/")} at end; latencies p50 of ${N}.\n`,
);
console.log(`| | ${rows.map((r) => label(r.s)).join(" | ")} |`);
console.log(`|---|${rows.map(() => "---:").join("|")}|`);
const line = (name, f) => console.log(`| ${name} | ${rows.map(f).join(" | ")} |`);
line("spawnTerminal → workload running", (r) => `${r.lat.started.toFixed(1)} ms`);
line("spawnTerminal → first output of `echo x`", (r) => `${r.lat.firstOutput.toFixed(1)} ms`);
line("spawnTerminal → `true` exited", (r) => `${r.lat.trueExit.toFixed(1)} ms`);
line("relay RSS, idle terminal", (r) =>
  r.s.method === "script"
    ? `${(r.mem.relay / 1024).toFixed(1)} MiB + child ${(r.mem.child / 1024).toFixed(1)} MiB`
    : `${(r.mem.relay / 1024).toFixed(1)} MiB`,
);
line("output, 100 MiB raw (`head -c`)", (r) => `${r.out.toFixed(0)} MiB/s`);
line("echo, 100 MiB in and out (`cat`, raw)", (r) => `${r.echo.toFixed(0)} MiB/s each way`);
line(
  "input a stopped workload does not read: taken in 5 s / relay RSS",
  (r) => `${r.unread.acceptedMb.toFixed(1)} MiB / ${(r.unread.relayKb / 1024).toFixed(1)} MiB`,
);
