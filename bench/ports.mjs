// The forwarded-ports rows (issue 29; README "Reaching servers on the host"), per network path, each
// against OpenSSH's own `ssh -L` to the same sshd measured in the same run:
//   * connect + first byte of an HTTP GET on the forwarded local port, p50, against the same GET
//     through `ssh -L` (started once, ControlMaster off). Target: ≤ ssh -L + 5 ms.
//   * download of plan.portsMb (BENCH_PORTS_MB; 100, --quick 20) MB that the server writes to every connection,
//     until the last byte is read, against `ssh -L`. Target: ≥ 0.8 × its throughput.
//   * detection: from the server's listen() until the forwarded local port answers (the worst of
//     the samples: the watch's 500 ms tick puts a listen anywhere in its cycle). The rig's "host" is
//     this machine, so the workload's clock is ours. Target: ≤ 1 s + 1 RTT.
//   * the host daemon's CPU over 10 s with plan.portsIdle (BENCH_PORTS_IDLE, 50) workspaces idle, each with a live
//     `cat`: the watch ticks for all of them. Direct only (the network plays no part in it).
//     Target: ≤ 2 % of one CPU.
// The servers run inside a workspace as one long-lived exec that opens a listener (on a port the
// kernel picks) for every line it reads and exits when its input closes. The host's server holds P
// on this machine's loopback, so the broker forwards it from another port: `ports` says which.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { connect, createServer } from "node:net";
import { brokers, hostProcesses, pids, cmdline, stat, terminate } from "./procs.mjs";
import { shutdownBrokers } from "./broker-shutdown.mjs";
import { killChild, lastLine, runCommand } from "./runtime-driver.mjs";
import { interleaved, reason, stats } from "./sampling.mjs";
import { rigOptions, sshArgs } from "./rig.mjs";

const LATENCY_ALLOWANCE_MS = 5;
const THROUGHPUT_FACTOR = 0.8;
const DETECT_BUDGET_MS = 1000;
const IDLE_CPU_LIMIT_PCT = 2;
const IDLE_TARGET_WORKSPACES = 50;
/** Local ports above the host's P polled for its forward (the broker takes the first free one). */
const DETECT_RANGE = 8;
const IDLE_WINDOW_MS = 10_000;
/** The servers' and the idle workspaces' execs live through the whole group. */
const LONG_EXEC_MS = 20 * 60_000;

/**
 * The workload: argv nonce, download bytes. Reads lines `http` / `big` and answers each with
 * `<kind> <port> <epoch ms>` once that listener is up; the HTTP server answers `ok <nonce> <port>`.
 */
const WORKLOAD = `const net=require("net"),http=require("http");
const nonce=process.argv[1],big=Number(process.argv[2]),chunk=Buffer.alloc(1<<20,120);
const kinds={
http:()=>{const s=http.createServer((q,r)=>r.end("ok "+nonce+" "+s.address().port+"\\n"));return s;},
big:()=>net.createServer(c=>{c.on("error",()=>{});let left=big;const w=()=>{while(left>0){const n=Math.min(left,chunk.length);left-=n;
if(!c.write(chunk.subarray(0,n)))return c.once("drain",w);}c.end();};w();})};
require("readline").createInterface({input:process.stdin}).on("line",k=>{const s=kinds[k]();
s.listen(0,"127.0.0.1",()=>console.log(k+" "+s.address().port+" "+Date.now()));}).on("close",()=>process.exit(0));`;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A port free on 127.0.0.1 right now (for ssh -L's listener). */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * One connection to 127.0.0.1:port: sends `request` (if any) and reads to the end. Resolves with
 * { firstByteMs, endMs, bytes, head } (head: the first 200 bytes), or rejects (refused, reset, timeout).
 */
function fetchOnce(port, { request = "", timeoutMs = 5000 } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const sock = connect({ host: "127.0.0.1", port, noDelay: true });
    let firstByteMs = null;
    let bytes = 0;
    let head = "";
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`127.0.0.1:${port}: nothing complete within ${timeoutMs} ms (${bytes} bytes)`));
    }, timeoutMs);
    sock.on("connect", () => request && sock.write(request));
    sock.on("data", (d) => {
      firstByteMs ??= performance.now() - t0;
      if (head.length < 200) head += d.subarray(0, 200 - head.length).toString("latin1");
      bytes += d.length;
    });
    sock.on("end", () => {
      clearTimeout(timer);
      sock.destroy();
      resolve({ firstByteMs, endMs: performance.now() - t0, bytes, head });
    });
    sock.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

const GET = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/** A GET through `port` that must reach the server with this nonce on host port `hostPort`. */
async function get(port, nonce, hostPort, timeoutMs) {
  const r = await fetchOnce(port, { request: GET, timeoutMs });
  if (!r.head.includes(`ok ${nonce} ${hostPort}`)) throw new Error(`127.0.0.1:${port} answered something else: ${r.head.slice(0, 80)}`);
  return r;
}

/** Whether a GET through `port` reaches that server now. */
const answers = (port, nonce, hostPort, timeoutMs) =>
  get(port, nonce, hostPort, timeoutMs).then(
    () => true,
    () => false,
  );

/** The host daemon of `rootName` (`node <root>/agent/<hash>/agent.cjs daemon …`). */
function daemonPid(rootName) {
  return pids().find((pid) => {
    const cmd = cmdline(pid);
    return cmd.includes(`${rootName}/agent/`) && / daemon( |$)/.test(cmd) && stat(pid)?.state !== "Z";
  });
}

export async function benchPorts(ctx, net) {
  const { rt, rig, plan } = ctx;
  const quick = plan.mode === "quick";
  const log = (s) => ctx.log(`[ports ${net.name}] ${s}`);
  const rootName = `.paseo-ssh-test-${rig.runId}-bench-ports-${net.key}`;
  const options = rigOptions(ctx, net.port, rootName, { brokerIdleMs: 600_000 });
  const downloadMb = plan.portsMb;
  const idleWorkspaces = plan.portsIdle;
  const out = { name: net.name, key: net.key, rttMs: net.rttMs, downloadMb, rows: {} };
  const cleanups = [];
  const nonce = randomBytes(8).toString("hex");

  const create = async (workspaceId) => {
    await rt.op("create", {
      workspaceId,
      options,
      extra: {
        input: {
          workspaceId,
          project: { projectId: "bench-ports", source: { kind: "directory", path: ctx.repos.tiny.path } },
          placement: { kind: "existing" },
        },
      },
    });
  };
  /** The local port the broker forwards `hostPort` from, as `ports` reports it (polled, 15 s at most). */
  const forwardedPort = async (workspaceId, hostPort, timeoutMs = 15_000) => {
    const t0 = performance.now();
    for (;;) {
      const r = await rt.op("ports", { workspaceId, options });
      const hit = JSON.parse(r.stdout).ports.find((p) => p.hostPort === hostPort);
      if (hit) return hit.localPort;
      if (performance.now() - t0 > timeoutMs) throw new Error(`ports never listed host port ${hostPort} (${r.stdout.trim()})`);
      await sleep(200);
    }
  };

  try {
    const ws = "bench-ports";
    log("create; the servers' exec");
    await create(ws);
    const h = rt.startExec(options, ws, [process.execPath, "-e", WORKLOAD, nonce, String(downloadMb * 1048576)], {
      keepStdin: true,
      timeoutMs: LONG_EXEC_MS,
    });
    const endServers = async () => {
      h.endInput();
      await Promise.race([h.done.catch(() => undefined), sleep(5000)]);
      h.kill();
    };
    cleanups.push(endServers);
    if ((await h.started) === null) await h.done;
    const lines = [];
    let waiters = [];
    let buf = "";
    h.child.stdio[1].on("data", (d) => {
      buf += d;
      const parts = buf.split("\n");
      buf = parts.pop();
      for (const line of parts) {
        const [kind, port, at] = line.split(" ");
        lines.push({ kind, hostPort: Number(port), listenAt: Number(at), arrivedAt: Date.now() });
      }
      for (const w of waiters) w();
      waiters = [];
    });
    /** Asks the workload for a listener of `kind`; resolves with { hostPort, listenAt, arrivedAt }. */
    const listen = async (kind) => {
      const seen = lines.length;
      h.child.stdio[0].write(`${kind}\n`);
      const t0 = performance.now();
      while (lines.length <= seen) {
        if (performance.now() - t0 > 30_000) throw new Error(`the workload did not report its ${kind} listener within 30 s`);
        await new Promise((r) => {
          waiters.push(r);
          setTimeout(r, 1000);
        });
      }
      return lines[seen];
    };

    // Detection: poll the ports the broker would take (the first free above P, P itself being the
    // server's here): P+1 every 10 ms, up to P+DETECT_RANGE every 40 ms (each in a loop of its own,
    // so a stranger's listener that never answers holds up nothing); only after 1.5 s ask `ports`
    // as well, so its node start-ups do not load the machine while the common case is timed.
    const detectSamples = quick ? 3 : 6;
    const detections = [];
    for (let i = 0; i < detectSamples; i++) {
      const l = await listen("http");
      let winner = null;
      const poll = async (port, everyMs) => {
        while (!winner && Date.now() - l.listenAt < 20_000) {
          if (await answers(port, nonce, l.hostPort, 2000)) {
            winner ??= { port, at: Date.now() };
            return;
          }
          await sleep(everyMs);
        }
      };
      const asked = sleep(1500).then(async () => {
        const port = winner ? null : await forwardedPort(ws, l.hostPort).catch(() => null);
        if (port !== null) await poll(port, 10);
      });
      await Promise.all([asked, ...Array.from({ length: DETECT_RANGE }, (_, k) => poll(l.hostPort + k + 1, k === 0 ? 10 : 40))]);
      if (!winner) throw new Error(`host port ${l.hostPort} not answering here 20 s after its listen`);
      const { port: answeredOn, at: answeredAt } = winner;
      const reported = await forwardedPort(ws, l.hostPort);
      if (reported !== answeredOn) throw new Error(`host port ${l.hostPort} answered on ${answeredOn} but ports says ${reported}`);
      detections.push(answeredAt - l.listenAt);
      log(`detection ${i + 1}/${detectSamples}: ${answeredAt - l.listenAt} ms (output line arrived after ${l.arrivedAt - l.listenAt} ms)`);
      // The next listen lands elsewhere in the watch's tick.
      await sleep(137 * (i + 1));
    }
    out.rows.detect = stats("listen() → forwarded local port answers", detections);

    // Latency and throughput, through the forward and through one `ssh -L` for both servers.
    const http = lines.at(-1);
    const big = await listen("big");
    const fwdHttp = await forwardedPort(ws, http.hostPort);
    const fwdBig = await forwardedPort(ws, big.hostPort);
    const [sshHttp, sshBig] = [await freePort(), await freePort()];
    const args = sshArgs(ctx, net.port, "-N", "-o", "ControlMaster=no", "-o", "ExitOnForwardFailure=yes");
    args.push("-L", `${sshHttp}:127.0.0.1:${http.hostPort}`, "-L", `${sshBig}:127.0.0.1:${big.hostPort}`);
    const sshL = spawn("ssh", args, { stdio: ["ignore", "ignore", "pipe"], detached: true });
    let sshErr = "";
    sshL.stderr.on("data", (d) => (sshErr += d));
    cleanups.push(() => killChild(sshL));
    const t0 = performance.now();
    for (;;) {
      if (sshL.exitCode !== null) throw new Error(`ssh -L exited ${sshL.exitCode}: ${lastLine(sshErr)}`);
      if (await answers(sshHttp, nonce, http.hostPort, 2000)) break;
      if (performance.now() - t0 > 15_000) throw new Error(`ssh -L did not answer within 15 s: ${lastLine(sshErr)}`);
      await sleep(20);
    }
    log(
      `servers on host ports ${http.hostPort} (http), ${big.hostPort} (download); forwarded from ${fwdHttp}, ${fwdBig}; ssh -L ${sshHttp}, ${sshBig}`,
    );

    const firstByte = (port) => async () => (await get(port, nonce, http.hostPort, 10_000)).firstByteMs;
    Object.assign(
      out.rows,
      await interleaved(
        {
          firstByte: { label: "GET, connect → first byte, forwarded port", run: firstByte(fwdHttp) },
          firstByteSsh: { label: "GET, connect → first byte, ssh -L", run: firstByte(sshHttp) },
        },
        quick ? 7 : 15,
        2,
        log,
      ),
    );
    const bytes = downloadMb * 1048576;
    const download = (port) => async () => {
      const r = await fetchOnce(port, { timeoutMs: 300_000 });
      if (r.bytes !== bytes) throw new Error(`read ${r.bytes} bytes of ${bytes}`);
      return r.endMs;
    };
    log(`${downloadMb} MB downloads`);
    Object.assign(
      out.rows,
      await interleaved(
        {
          download: { label: `${downloadMb} MB download, forwarded port`, run: download(fwdBig) },
          downloadSsh: { label: `${downloadMb} MB download, ssh -L`, run: download(sshBig) },
        },
        quick ? 2 : 3,
        0,
        log,
      ),
    );

    killChild(sshL);
    await endServers();
    if (net.key === "direct") out.idle = await idleCpu(ctx, rt, options, create, idleWorkspaces, rootName, log);
  } catch (err) {
    out.error = reason(err);
    log(`failed: ${out.error}`);
  } finally {
    for (const f of cleanups.reverse()) await Promise.resolve(f()).catch((e) => log(`cleanup: ${reason(e)}`));
    // Our brokers retire their host daemons; whatever is left under this root goes too.
    for (const err of await shutdownBrokers(ctx.tmp)) log(`broker shutdown: ${err}`);
    await terminate(brokers(ctx.tmp));
    await terminate(hostProcesses(null, rootName).pids);
    await runCommand("ssh", sshArgs(ctx, net.port, `rm -rf ${rootName}`));
  }
  out.targets = portsTargets(out);
  return out;
}

/**
 * The host daemon's CPU (utime + stime of its own process) and our brokers' over IDLE_WINDOW_MS,
 * as % of one CPU, with the daemon's per-second figures so a burst shows against a steady cost.
 */
async function cpuOver(ctx, pid) {
  const brokerCpu = () => brokers(ctx.tmp).reduce((a, p) => a + (stat(p)?.cpuMs ?? 0), 0);
  const [d0, b0, w0] = [stat(pid).cpuMs, brokerCpu(), performance.now()];
  const perSecond = [];
  for (let last = d0; performance.now() - w0 < IDLE_WINDOW_MS;) {
    await sleep(1000);
    const now = stat(pid)?.cpuMs;
    if (now === undefined) throw new Error("the host daemon exited during the measurement");
    perSecond.push(+((now - last) / 10).toFixed(1));
    last = now;
  }
  const [d1, b1, w1] = [stat(pid).cpuMs, brokerCpu(), performance.now()];
  const pct = (ms) => +((ms / (w1 - w0)) * 100).toFixed(2);
  return { windowMs: Math.round(w1 - w0), daemonPct: pct(d1 - d0), brokersPct: pct(b1 - b0), perSecond };
}

/**
 * `n` workspaces; the host daemon's CPU first with no live exec in the root (the port watch is
 * off: what the daemon costs anyway), then with a live `cat` in each (the watch ticks for all).
 */
async function idleCpu(ctx, rt, options, create, n, rootName, log) {
  const ids = Array.from({ length: n }, (_, i) => `bench-ports-idle-${i}`);
  const handles = [];
  try {
    const t0 = performance.now();
    for (let i = 0; i < n; i += 5) await Promise.all(ids.slice(i, i + 5).map(create));
    const createMs = Math.round(performance.now() - t0);
    const pid = daemonPid(rootName);
    if (!pid) throw new Error(`no host daemon found under ${rootName}`);
    // Let the creates' own work (the host's spare checkout) settle first.
    await sleep(3000);
    const noExecs = await cpuOver(ctx, pid);
    log(
      `${n} workspace(s) created in ${createMs} ms; no live exec: host daemon ${noExecs.daemonPct} % (per second: ${noExecs.perSecond.join(", ")})`,
    );
    let failed = 0;
    for (let i = 0; i < n; i += 10) {
      const batch = ids.slice(i, i + 10).map((id) => rt.startExec(options, id, ["/bin/cat"], { keepStdin: true, timeoutMs: LONG_EXEC_MS }));
      handles.push(...batch);
      failed += (await Promise.all(batch.map((h) => h.started))).filter((s) => s === null).length;
    }
    if (failed) throw new Error(`${failed} of ${n} live execs did not start`);
    await sleep(3000);
    const live = await cpuOver(ctx, pid);
    log(`a live cat in each: host daemon ${live.daemonPct} % (per second: ${live.perSecond.join(", ")}; brokers ${live.brokersPct} %)`);
    return { workspaces: n, createMs, ...live, noExecs };
  } catch (err) {
    return { workspaces: n, unavailable: reason(err) };
  } finally {
    for (const h of handles) h.endInput();
    await Promise.race([Promise.all(handles.map((h) => h.done.catch(() => undefined))), sleep(15_000)]);
    for (const h of handles) h.kill();
  }
}

const r0 = Math.round;
const ok = (row) => row && !row.unavailable && Number.isFinite(row.p50);
const mbps = (mb, ms) => mb / (ms / 1000);

/** Each target: { id, what, met (null: not measured), text }; computed from this run's rows only. */
function portsTargets(out) {
  const { rows, rttMs } = out;
  const na = (...list) => ({ met: null, text: `n/a (${out.error ?? list.find((r) => r?.unavailable)?.unavailable ?? "not run"})` });
  const t = [];
  const fb = rows.firstByte;
  const fbRef = rows.firstByteSsh;
  t.push({
    id: "P1",
    what: `forwarded GET, connect → first byte p50 ≤ ssh -L + ${LATENCY_ALLOWANCE_MS} ms`,
    ...(ok(fb) && ok(fbRef)
      ? {
          met: fb.p50 - fbRef.p50 <= LATENCY_ALLOWANCE_MS,
          text: `${fb.p50.toFixed(1)} ms = ssh -L ${fbRef.p50.toFixed(1)} ms ${fb.p50 >= fbRef.p50 ? "+" : "−"} ${Math.abs(fb.p50 - fbRef.p50).toFixed(1)} ms`,
        }
      : na(fb, fbRef)),
  });
  const dl = rows.download;
  const dlRef = rows.downloadSsh;
  t.push({
    id: "P2",
    what: `${out.downloadMb} MB download throughput ≥ ${THROUGHPUT_FACTOR} × ssh -L`,
    ...(ok(dl) && ok(dlRef)
      ? {
          met: dlRef.p50 / dl.p50 >= THROUGHPUT_FACTOR,
          text: `${mbps(out.downloadMb, dl.p50).toFixed(0)} MB/s vs ssh -L ${mbps(out.downloadMb, dlRef.p50).toFixed(0)} MB/s (${(dlRef.p50 / dl.p50).toFixed(2)}×)`,
        }
      : na(dl, dlRef)),
  });
  const d = rows.detect;
  t.push({
    id: "P3",
    what: "detection: listen() → forwarded port answers, worst sample ≤ 1 s + 1 RTT",
    ...(d && Number.isFinite(d.max)
      ? {
          met: d.max <= DETECT_BUDGET_MS + rttMs,
          text: `worst ${r0(d.max)} ms, p50 ${r0(d.p50)} ms of ${d.n} (limit ${r0(DETECT_BUDGET_MS + rttMs)} ms)`,
        }
      : na(d)),
  });
  if (out.key === "direct") {
    const i = out.idle;
    const what = `host daemon CPU with ${IDLE_TARGET_WORKSPACES} idle workspaces (live exec each) ≤ ${IDLE_CPU_LIMIT_PCT} % of one CPU`;
    if (!i || i.unavailable) t.push({ id: "P4", what, ...na(i) });
    else {
      const text = `${i.daemonPct} % over ${r0(i.windowMs / 1000)} s with ${i.workspaces} workspace(s) (no live exec: ${i.noExecs.daemonPct} %; brokers ${i.brokersPct} %)`;
      const fewer = i.workspaces < IDLE_TARGET_WORKSPACES;
      t.push({
        id: "P4",
        what,
        met: fewer ? null : i.daemonPct <= IDLE_CPU_LIMIT_PCT,
        text: fewer ? `n/a (only ${i.workspaces}): ${text}` : text,
      });
    }
  }
  return t;
}

export function portsMarkdown(rows, table) {
  if (!rows?.length) return [];
  const cell = (r, key) => {
    const row = r.rows[key];
    if (!row) return r.error ? `not run: ${r.error}` : "not run";
    if (row.unavailable) return `unavailable: ${row.unavailable}`;
    return row.n > 1 ? `${r0(row.p50)} [${r0(row.min)}–${r0(row.max)}]` : `${r0(row.p50)}`;
  };
  const keys = ["detect", "firstByte", "firstByteSsh", "download", "downloadSsh"];
  const label = (k) => rows.find((r) => r.rows[k])?.rows[k].label ?? k;
  return [
    "",
    "### Forwarded ports (ms, p50 [min–max]; against `ssh -L` to the same sshd)",
    "",
    table(
      ["row", ...rows.map((r) => r.name)],
      keys.map((k) => [label(k), ...rows.map((r) => cell(r, k))]),
    ),
    "",
    table(
      ["target", ...rows.map((r) => r.name)],
      [...new Set(rows.flatMap((r) => r.targets.map((t) => t.id)))].map((id) => [
        `${id}. ${rows.flatMap((r) => r.targets).find((t) => t.id === id).what}`,
        ...rows.map((r) => {
          const t = r.targets.find((x) => x.id === id);
          return t ? `${t.text} — ${t.met === null ? "n/a" : t.met ? "met" : "**missed**"}` : "–";
        }),
      ]),
    ),
  ];
}

/** Terminal lines for the targets. */
export function portsSummary(rows) {
  return (rows ?? []).flatMap((r) =>
    r.targets.map((t) => `  ports (${r.name}): ${t.met === null ? "n/a   " : t.met ? "met   " : "MISSED"} ${t.id} ${t.what}: ${t.text}`),
  );
}
