// Servers a workspace's processes start on the host answer on the Paseo side at the same port
// (issue 29), against a real sshd in a network namespace of its own (test/support/netns-host.ts), so
// the host's loopback is not this machine's: nothing answers here unless the broker forwards it.
import { createServer, connect, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { rig } from "../rig/rig.js";
import { alive, brokerStats, stopBroker } from "../support/broker.js";
import { ExecWorkspace, type ExecHandle } from "../support/exec.js";
import { runCli } from "../support/run-cli.js";
import { suiteRoot } from "../support/workspace.js";
import { rigOptions } from "../rig/rig.js";
import { needs, unless } from "../support/needs.js";
import { netnsHostSkipReason, startNetnsHost, type NetnsHost } from "../support/netns-host.js";

const skip = netnsHostSkipReason() ?? needs.localHost("the namespaced sshd runs on this machine");

let host: NetnsHost;
const workspaces: ExecWorkspace[] = [];

beforeAll(async () => {
  if (skip) return;
  host = await startNetnsHost(rig().user);
}, 60_000);

afterAll(async () => {
  if (skip) return;
  for (const ws of workspaces) {
    await ws.cleanup().catch(() => undefined);
    await stopBroker(parseRuntimeOptions(ws.options), { retireDaemon: true }).catch(() => undefined);
  }
  await host?.stop();
}, 60_000);

async function workspace(label: string, extra: Record<string, unknown> = {}): Promise<ExecWorkspace> {
  const ws = new ExecWorkspace(label, { ...host.options, keepaliveIntervalMs: 1000, ...extra });
  workspaces.push(ws);
  await ws.create();
  return ws;
}

/**
 * A node server: listens on `host`:`port` (0: a port it picks), prints `listening <port>`, answers
 * every connection with "hi <port>", closes its listener after `closeAfterMs` (printing `closed`)
 * and lives on until killed.
 */
function server(
  ws: ExecWorkspace,
  host: string,
  port: number | "$PASEO_PORT",
  closeAfterMs = 600_000,
  paseoPort = freePortGuess(),
): ExecHandle {
  const code = `const s=require("net").createServer(c=>c.end("hi "+s.address().port));
s.listen(${port === "$PASEO_PORT" ? "Number(process.env.PASEO_PORT)" : port},${JSON.stringify(host)},()=>console.log("listening "+s.address().port));
setTimeout(()=>s.close(()=>console.log("closed")),${closeAfterMs});setInterval(()=>{},1000);`;
  return ws.start({ argv: [process.execPath, "-e", code], env: { PATH: "/usr/bin:/bin", PASEO_PORT: String(paseoPort) } });
}

let nextPort = 20_000 + Math.floor(Math.random() * 20_000);
/** A port number for the host's server (the host's loopback is its own: only the local side may clash). */
function freePortGuess(): number {
  return nextPort++;
}

const REFUSED = "<refused>";

/** What a connection to `address`:`port` here receives: its bytes, REFUSED (refused or reset), or "" (nothing within 1 s). */
function fetchHere(address: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect({ host: address, port });
    let got = "";
    const done = (refused = false) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(refused && got === "" ? REFUSED : got);
    };
    const timer = setTimeout(() => done(), 1000);
    sock.on("data", (d) => (got += d.toString()));
    sock.on("end", () => done());
    sock.on("error", () => done(true));
  });
}

/** Polls until `fetchHere` gives (or stops giving) the answer; the milliseconds it took, or -1. */
async function whenAnswer(address: string, port: number, want: (got: string) => boolean, ms: number): Promise<number> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (want(await fetchHere(address, port))) return Date.now() - t0;
    await new Promise((r) => setTimeout(r, 50));
  }
  return -1;
}

async function listeningPort(h: ExecHandle): Promise<number> {
  await h.waitOutput("listening ", 30_000);
  for (;;) {
    const m = /listening (\d+)\n/.exec(h.output().toString("utf8"));
    if (m) return Number(m[1]);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface PortRow {
  hostPort: number;
  localPort: number;
  pid: number;
  argv0: string;
  since: string;
  named: boolean;
}

async function ports(ws: ExecWorkspace): Promise<PortRow[]> {
  const r = await ws.lifecycle("ports");
  if (r.code !== 0) throw new Error(`ports failed: ${r.stderr}`);
  return (JSON.parse(r.stdout.toString("utf8")) as { ports: PortRow[] }).ports;
}

describe("reaching servers on the host", unless(skip), () => {
  it("a server on $PASEO_PORT (IPv4) answers here within 2 s of listening and stops within 2 s after it closes", async () => {
    const ws = await workspace("ports-v4");
    const h = server(ws, "127.0.0.1", "$PASEO_PORT", 8000);
    const port = await listeningPort(h);
    // The host's loopback is not ours: only the forward can answer.
    const up = await whenAnswer("127.0.0.1", port, (g) => g === `hi ${port}`, 2000);
    console.log(`forward answered ${up} ms after the server printed that it listens`);
    expect(up).toBeGreaterThanOrEqual(0);
    const rows = await ports(ws);
    expect(rows).toEqual([expect.objectContaining({ hostPort: port, localPort: port, argv0: "node" })]);
    expect(rows[0]!.pid).toBeGreaterThan(0);
    expect(Date.parse(rows[0]!.since)).toBeGreaterThan(Date.now() - 60_000);
    // status lists it below its host's row, from the broker that holds it.
    const status = await runCli(["status", "--options", JSON.stringify(ws.options)]);
    expect(status.code, status.stderr.toString()).toBe(0);
    const text = status.stdout.toString();
    const section = text.slice(text.indexOf("\nFORWARDED PORTS\n"));
    expect(section).toMatch(
      new RegExp(`\\n\\S+\\s+${ws.workspaceId}\\s+${port}\\s+${port}\\s+${rows[0]!.pid}\\s+node\\s+${rows[0]!.since}\\n`),
    );
    const json = await runCli(["status", "--options", JSON.stringify(ws.options), "--json", "true"]);
    expect(JSON.parse(json.stdout.toString()).forwards).toEqual([
      {
        workspaceId: ws.workspaceId,
        hostPort: port,
        localPort: port,
        pid: rows[0]!.pid,
        argv0: "node",
        since: rows[0]!.since,
        named: true,
      },
    ]);
    await h.waitOutput("closed", 20_000);
    const down = await whenAnswer("127.0.0.1", port, (g) => g === REFUSED, 2000);
    console.log(`forward stopped answering ${down} ms after the server closed its listener`);
    expect(down).toBeGreaterThanOrEqual(0);
    // The forward itself ends within a tick of the daemon's watch (500 ms), bounded here at 2 s.
    const t0 = Date.now();
    let left = await ports(ws);
    while (left.length > 0 && Date.now() - t0 < 2000) left = await ports(ws);
    expect(left).toEqual([]);
    h.child.kill("SIGKILL");
  });

  it("a server on ::1 at a port it chose answers here at that port; a port taken here maps to another, and ports says so", async () => {
    const ws = await workspace("ports-v6");
    const h6 = server(ws, "::1", 0);
    const p6 = await listeningPort(h6);
    expect(await whenAnswer("::1", p6, (g) => g === `hi ${p6}`, 2000)).toBeGreaterThanOrEqual(0);
    // Taken on this side: the forward goes to another local port.
    const taken: Server = await new Promise((resolve) => {
      const s = createServer((c) => c.end("local")).listen(0, "127.0.0.1", () => resolve(s));
    });
    const busy = (taken.address() as { port: number }).port;
    try {
      const h = server(ws, "127.0.0.1", busy);
      expect(await listeningPort(h)).toBe(busy);
      let row: PortRow | undefined;
      for (let i = 0; i < 40 && !row; i++) {
        row = (await ports(ws)).find((r) => r.hostPort === busy);
        if (!row) await new Promise((r) => setTimeout(r, 100));
      }
      expect(row).toBeDefined();
      expect(row!.localPort).not.toBe(busy);
      expect(await fetchHere("127.0.0.1", row!.localPort)).toBe(`hi ${busy}`);
      expect(await fetchHere("127.0.0.1", busy)).toBe("local");
    } finally {
      taken.close();
    }
  });

  it("another workspace's listener is not its, and a listener outside any workspace is not forwarded", async () => {
    const a = await workspace("ports-a");
    const b = await workspace("ports-b");
    const ha = server(a, "127.0.0.1", "$PASEO_PORT");
    const pa = await listeningPort(ha);
    const hb = server(b, "127.0.0.1", "$PASEO_PORT");
    const pb = await listeningPort(hb);
    // The same login user's server started outside any workspace, and root's.
    const outside = freePortGuess();
    const rootPort = freePortGuess();
    const js = (p: number) => `require("net").createServer(c=>c.end("x")).listen(${p},"127.0.0.1");setTimeout(()=>process.exit(0),20000)`;
    host.exec(["sh", "-c", `runuser -u ${rig().user} -- ${process.execPath} -e '${js(outside)}' >/dev/null 2>&1 &`]);
    host.exec(["sh", "-c", `${process.execPath} -e '${js(rootPort)}' >/dev/null 2>&1 &`]);
    expect(await whenAnswer("127.0.0.1", pa, (g) => g === `hi ${pa}`, 5000)).toBeGreaterThanOrEqual(0);
    expect(await whenAnswer("127.0.0.1", pb, (g) => g === `hi ${pb}`, 5000)).toBeGreaterThanOrEqual(0);
    expect((await ports(a)).map((r) => r.hostPort)).toEqual([pa]);
    expect((await ports(b)).map((r) => r.hostPort)).toEqual([pb]);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await fetchHere("127.0.0.1", outside)).toBe(REFUSED);
    expect(await fetchHere("127.0.0.1", rootPort)).toBe(REFUSED);
  });

  it("after a link reset the forward answers again; pause ends it, resume brings it back", async () => {
    const ws = await workspace("ports-reset");
    const h = server(ws, "127.0.0.1", "$PASEO_PORT");
    const port = await listeningPort(h);
    expect(await whenAnswer("127.0.0.1", port, (g) => g === `hi ${port}`, 2000)).toBeGreaterThanOrEqual(0);
    // Every connection of the namespaced sshd is cut (its per-connection processes killed).
    for (const pid of host.sshd.pids().slice(1)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone
      }
    }
    // While the link is down a connection is refused at once, never left hanging.
    const t0 = Date.now();
    expect(await fetchHere("127.0.0.1", port)).toBe(REFUSED);
    expect(Date.now() - t0).toBeLessThan(900);
    const back = await whenAnswer("127.0.0.1", port, (g) => g === `hi ${port}`, 20_000);
    console.log(`forward answered again ${back} ms after the link was cut`);
    expect(back).toBeGreaterThanOrEqual(0);
    expect((await ws.lifecycle("pause")).code).toBe(0);
    expect(await whenAnswer("127.0.0.1", port, (g) => g === REFUSED, 2000)).toBeGreaterThanOrEqual(0);
    expect(await ports(ws)).toEqual([]);
    expect((await ws.lifecycle("resume")).code).toBe(0);
    expect(await whenAnswer("127.0.0.1", port, (g) => g === `hi ${port}`, 5000)).toBeGreaterThanOrEqual(0);
  });

  it("a privileged host port is forwarded from a local port >= 1024; a forwardPorts list leaves out other ports but not the one Paseo named", async () => {
    // This namespace lets ordinary users bind low ports, as a host with that sysctl (or a capability) does.
    host.exec(["sh", "-c", "echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start"]);
    const ws = await workspace("ports-low", { forwardPorts: [1] });
    const low = 900 + Math.floor(Math.random() * 100);
    const named = server(ws, "127.0.0.1", "$PASEO_PORT", 600_000, low);
    expect(await listeningPort(named)).toBe(low);
    const other = server(ws, "127.0.0.1", 0);
    const otherPort = await listeningPort(other);
    let row: PortRow | undefined;
    for (let i = 0; i < 40 && !row; i++) {
      row = (await ports(ws)).find((r) => r.hostPort === low);
      if (!row) await new Promise((r) => setTimeout(r, 100));
    }
    expect(row).toMatchObject({ hostPort: low, named: true });
    expect(row!.localPort).toBeGreaterThanOrEqual(1024);
    expect(await fetchHere("127.0.0.1", row!.localPort)).toBe(`hi ${low}`);
    // The port nobody named is outside the list: not forwarded (it was seen: the watch ticked since).
    await new Promise((r) => setTimeout(r, 1500));
    expect((await ports(ws)).map((r) => r.hostPort)).toEqual([low]);
    expect(await fetchHere("127.0.0.1", otherPort)).toBe(REFUSED);
    named.child.kill("SIGKILL");
    other.child.kill("SIGKILL");
  });

  it("a killed broker takes its forwards along; the live exec's wrapper starts a new one and they come back", async () => {
    const ws = await workspace("ports-broker");
    const h = server(ws, "127.0.0.1", "$PASEO_PORT");
    const port = await listeningPort(h);
    expect(await whenAnswer("127.0.0.1", port, (g) => g === `hi ${port}`, 2000)).toBeGreaterThanOrEqual(0);
    const options = parseRuntimeOptions(ws.options);
    const pid = (await brokerStats(options))!.pid;
    process.kill(pid, "SIGKILL");
    for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 20));
    expect(alive(pid)).toBe(false);
    const back = await whenAnswer("127.0.0.1", port, (g) => g === `hi ${port}`, 30_000);
    console.log(`forward answered again ${back} ms after its broker was killed`);
    expect(back).toBeGreaterThanOrEqual(0);
    expect((await brokerStats(options))!.pid).not.toBe(pid);
    h.child.kill("SIGKILL");
  });

  it("20 ports at once: every one answers here", async () => {
    const ws = await workspace("ports-20");
    const code = `const net=require("net");let n=0;const ports=[];
for(let i=0;i<20;i++){const s=net.createServer(c=>c.end("hi "+s.address().port));s.listen(0,"127.0.0.1",()=>{ports.push(s.address().port);if(++n===20)console.log("listening "+ports.join(","))})}
setInterval(()=>{},1000);`;
    const h = ws.start({ argv: [process.execPath, "-e", code], env: { PATH: "/usr/bin:/bin" } });
    await h.waitOutput("listening ", 30_000);
    let list: number[] = [];
    for (let m; !(m = /listening ([\d,]+)\n/.exec(h.output().toString("utf8")));) await new Promise((r) => setTimeout(r, 20));
    list = /listening ([\d,]+)\n/.exec(h.output().toString("utf8"))![1]!.split(",").map(Number);
    expect(list).toHaveLength(20);
    // Each listed, then answering at its local port (the host picked them: one may be taken here).
    const t0 = Date.now();
    let rows = await ports(ws);
    while (rows.length < 20 && Date.now() - t0 < 10_000) rows = await ports(ws);
    expect(rows.map((r) => r.hostPort).sort()).toEqual([...list].sort());
    const answers = await Promise.all(rows.map((r) => fetchHere("127.0.0.1", r.localPort)));
    console.log(`20 ports listed and answered here within ${Date.now() - t0} ms`);
    expect(answers).toEqual(rows.map((r) => `hi ${r.hostPort}`));
    h.child.kill("SIGKILL");
  });

  it("doctor says when sshd refuses TCP forwarding, and that ports are forwarded where it does not", async () => {
    const line = async (port: number) => {
      const options = rigOptions({ ...host.options, port, root: suiteRoot("ports-doctor") });
      const r = await runCli(["doctor", "--options", JSON.stringify(options)]);
      expect(r.code).toBe(0);
      return r.stdout
        .toString()
        .split("\n")
        .find((l) => / forwarded ports /.test(l));
    };
    expect(await line(host.noForward.port)).toMatch(/NOT forwarded: sshd refuses TCP forwarding/);
    expect(await line(host.sshd.port)).toMatch(/detected and forwarded to this machine's loopback$/);
  });
});
