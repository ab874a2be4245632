// PTY-mode exec over the real sshd (docs/contract.md#scenarios A21–A24, #exec-fd3): the initial
// size is in place before the program starts; resizes are acknowledged only once applied; signals
// arrive as fd3 frames; unsupported ones kill first. Every case runs on each way a host can give
// a PTY exec its terminal: owned by the host daemon through python3 or util-linux `script`, and
// sshd's own pty where the host has neither (forced with a test hook that hides the programs).
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ExecWorkspace, eventually, exitOf, secretLeaks } from "../support/exec.js";
import { needs, skipUnless, unless } from "../support/needs.js";
import { rig } from "../rig/rig.js";
import { onHost, requireView } from "../support/host-view.js";

const PROBE =
  "process.stdin.setEncoding('utf8');process.stdout.write(`${process.cwd()}|${process.stdout.isTTY}|${process.stdout.columns}x${process.stdout.rows}|λ`);process.stdin.once('data',data=>{process.stdout.write(`|${data.trim()}|${process.stdout.columns}x${process.stdout.rows}`);process.exit(6)})";

/** How the terminal is owned, the test hook that makes it so, and the workload's parent then. */
const MODES = [
  {
    mode: "a terminal the host daemon owns (python3)",
    searchPath: (_ws: ExecWorkspace): string | undefined => undefined,
    parent: /python3? -I -S \S*terminal-relay\.py/,
    need: () => needs.hostCommand("python3", "the host daemon's terminal relay runs on the host's python3"),
  },
  {
    mode: "a terminal the host daemon owns (util-linux script)",
    searchPath: hostScriptOnlyPath,
    parent: /terminal-script-child\.cjs/,
    need: () => needs.utilLinuxScript("the host daemon's terminal fallback"),
  },
  {
    mode: "sshd's pty (the host has no way to own one)",
    searchPath: (_ws: ExecWorkspace) => "",
    parent: /agent\.cjs pty-attach/,
    need: needs.serverPty,
  },
];

/** A directory on the host beside the workspace's root with only util-linux script and stty in it. */
function hostScriptOnlyPath(ws: ExecWorkspace): string {
  const bin = `${ws.configuredRoot}-script-only-bin`;
  mkdirSync(onHost(bin), { recursive: true, mode: 0o755 });
  for (const name of ["script", "stty"]) symlinkSync(`/usr/bin/${name}`, onHost(join(bin, name)));
  return bin;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(MODES)("exec, PTY mode, over SSH, on $mode", ({ searchPath, parent, need }) => {
  const unmet = need();
  const ws = new ExecWorkspace("exec-pty");
  beforeAll(async () => {
    if (unmet) return;
    ws.terminalSearchPath = searchPath(ws);
    await ws.create();
  });
  afterAll(() => (unmet ? undefined : ws.cleanup()));
  beforeEach((ctx) => skipUnless(ctx, unmet));

  const pty = { kind: "pty" as const, rows: 24, cols: 80 };

  it("the workload runs under the terminal's owner, with no other runtime process in between", async () => {
    const r = await ws.run({ argv: ["/bin/sh", "-c", 'tr "\\0" " " </proc/$PPID/cmdline'], env: { PATH: "/usr/bin:/bin" }, stdio: pty });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.toString("utf8")).toMatch(parent);
  });

  it("A21: size probe sees a tty of the initial size, then the resized one", async () => {
    const h = ws.start({ argv: [rig().remoteNode, "-e", PROBE], env: { PATH: "/usr/local/bin:/usr/bin:/bin" }, stdio: pty });
    await h.waitOutput(`${ws.root}|true|80x24|λ`, 10_000);
    h.sendControl({ type: "resize", protocolVersion: 1, id: 1, rows: 39, cols: 103 });
    await h.waitEvent("resized", 1000);
    h.stdin.write("héllo\n");
    const r = await eventually(
      () => h.output().toString("utf8"),
      (t) => t.includes("|héllo|103x39"),
      10_000,
    );
    expect(r).toContain("|héllo|103x39");
    const done = await h.done;
    expect(done.events.map((e) => e.type)).toEqual(["started", "resized", "eof", "exit"]);
    expect(done.events[1]).toEqual({ type: "resized", protocolVersion: 1, id: 1 });
    expect(done.events[3]).toEqual({ type: "exit", protocolVersion: 1, code: 6, signal: null });
    expect(done.code).toBe(6);
  });

  it("a rendezvous socket left by a killed agent is swept by the next PTY exec on sshd's pty; a fresh one and the daemon's socket are kept", async (ctx) => {
    if (ws.terminalSearchPath !== "") ctx.skip("not applicable: only sshd's pty uses rendezvous sockets");
    const first = await ws.run({ argv: ["/bin/true"], stdio: pty });
    expect(exitOf(first)).toEqual({ code: 0, signal: null });
    const run = onHost(join(ws.configuredRoot, "run"));
    const stale = join(run, "0".repeat(32) + ".sock");
    const fresh = join(run, "1".repeat(32) + ".sock");
    writeFileSync(stale, "");
    writeFileSync(fresh, "");
    const old = new Date(Date.now() - 10 * 60_000);
    utimesSync(stale, old, old);
    // The host daemon's socket is as old as the daemon: never a rendezvous leftover.
    const daemonSocket = readdirSync(run).find((n) => /^d-[0-9a-f]{16}\.sock$/.test(n))!;
    expect(daemonSocket).toBeDefined();
    utimesSync(join(run, daemonSocket), old, old);
    expect(exitOf(await ws.run({ argv: ["/bin/true"], stdio: pty }))).toEqual({ code: 0, signal: null });
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(fresh)).toBe(true);
    expect(existsSync(join(run, daemonSocket))).toBe(true);
  });

  it("back-to-back resizes are acknowledged in order, each once applied; the program sees the last", async () => {
    const script =
      "process.stdin.setEncoding('utf8');process.stdout.write('go');process.stdin.once('data',()=>{process.stdout.write(`alive|${process.stdout.columns}x${process.stdout.rows}`);process.exit(0)})";
    const h = ws.start({ argv: [rig().remoteNode, "-e", script], stdio: pty });
    await h.waitOutput("go");
    h.sendControl({ type: "resize", protocolVersion: 1, id: 1, rows: 41, cols: 99 });
    h.sendControl({ type: "resize", protocolVersion: 1, id: 2, rows: 37, cols: 101 });
    await h.waitEvent("resized", 2000, 2);
    h.stdin.write("x\n");
    const r = await h.done;
    expect(r.events.map((e) => e.type)).toEqual(["started", "resized", "resized", "eof", "exit"]);
    expect(r.events.slice(1, 3)).toEqual([
      { type: "resized", protocolVersion: 1, id: 1 },
      { type: "resized", protocolVersion: 1, id: 2 },
    ]);
    expect(r.stdout.toString("utf8")).toContain("alive|101x37");
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
  });

  it("a PTY workload killed by a signal nobody requested reports that signal", async () => {
    const r = await ws.run({ argv: ["/bin/sh", "-c", "kill -HUP $$"], stdio: pty });
    expect(exitOf(r)).toEqual({ code: null, signal: "SIGHUP" });
  });

  it("an invalid resize is refused as `Invalid PTY size`, kills the workload, writes one error", async () => {
    const h = ws.start({ argv: ["/bin/sleep", "30"], stdio: pty });
    await h.waitEvent("started");
    h.sendControl({ type: "resize", protocolVersion: 1, id: 1, rows: 0, cols: 40 });
    const r = await h.done;
    expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
    expect(r.events[1]).toMatchObject({ message: "Invalid PTY size" });
    expect((await ws.processes()).filter((p) => p.command.includes("sleep 30"))).toEqual([]);
  });

  it("an invalid control sent before `started` still kills the exec first, then fails with one error", async () => {
    const h = ws.start({ argv: ["/bin/sleep", "30"], stdio: pty });
    h.sendControl({ type: "resize", protocolVersion: 1, id: 1, rows: 10, cols: 10, root: "/private" });
    const r = await h.done;
    expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
    expect((r.events[1] as { message: string }).message).toMatch(/unrecognized key/i);
    expect((await ws.processes()).filter((p) => p.command.includes("sleep 30"))).toEqual([]);
    expect((await ws.signal(h.execId, "SIGKILL")).code).toBe(0);
  });

  it.each([["SIGTERM"], ["SIGKILL"]])("A22/A23: %s via fd3 ends the PTY workload with that signal", async (sig) => {
    const h = ws.start({ argv: ["/bin/sleep", "30"], env: { PATH: "/usr/bin:/bin" }, stdio: pty });
    await h.waitEvent("started");
    h.sendControl({ type: "signal", protocolVersion: 1, signal: sig });
    const r = await h.done;
    expect(exitOf(r)).toEqual({ code: null, signal: sig });
    const left = await eventually(
      () => ws.processes(),
      (p) => !p.some((x) => x.command.includes("sleep 30")),
    );
    expect(left.filter((x) => x.command.includes("sleep 30"))).toEqual([]);
  });

  it("A24: SIGUSR1 kills the execution first, then fails with `Unsupported signal`", async () => {
    const h = ws.start({ argv: ["/bin/sleep", "30"], env: { PATH: "/usr/bin:/bin" }, stdio: pty });
    await h.waitEvent("started");
    h.sendControl({ type: "signal", protocolVersion: 1, signal: "SIGUSR1" });
    await h.waitEvent("error", 5000);
    // Immediately after the error: no sleep left.
    const procs = await ws.processes();
    expect(procs.filter((p) => p.command.includes("sleep 30"))).toEqual([]);
    const r = await h.done;
    expect(r.events.map((e) => e.type)).toEqual(["started", "error"]);
    expect(r.events[1]).toMatchObject({ message: "Unsupported signal: SIGUSR1" });
  });

  it("an interactive shell gets a controlling terminal with job control and its exit code passes through", async () => {
    const h = ws.start({ argv: ["/bin/bash", "--norc", "--noprofile", "-i"], env: { PATH: "/usr/bin:/bin", PS1: "$ " }, stdio: pty });
    await h.waitEvent("started");
    h.stdin.write("sleep 0.1 & wait; tty >/dev/null && echo tty-ok; exit 9\n");
    const r = await h.done;
    expect(exitOf(r)).toEqual({ code: 9, signal: null });
    expect(r.stdout.toString("utf8")).toContain("tty-ok");
    expect(r.stdout.toString("utf8")).not.toContain("no job control");
  });

  it("pause stops the workload (never the terminal's owner: input still reaches the terminal); resume lets it read it, finish and report", async () => {
    const h = ws.start({
      argv: ["/bin/sh", "-c", "echo ready; read go; echo resumed-$go; exit 3"],
      env: { PATH: "/usr/bin:/bin" },
      stdio: pty,
    });
    await h.waitOutput("ready");
    expect((await ws.lifecycle("pause")).code).toBe(0);
    const paused = await ws.processes();
    expect(paused.filter((p) => p.command.includes("echo ready")).map((p) => p.state)).toEqual(["T"]);
    expect(paused.filter((p) => /terminal-relay|terminal-script-child|pty-attach|agent\.cjs/.test(p.command))).toEqual([]);
    h.stdin.write("now\n");
    await h.waitOutput("now"); // the terminal's echo: the line is in the terminal, the workload still stopped
    expect(h.output().toString("utf8")).not.toContain("resumed-");
    expect((await ws.lifecycle("resume")).code).toBe(0);
    const r = await h.done;
    expect(exitOf(r)).toEqual({ code: 3, signal: null });
    expect(r.stdout.toString("utf8")).toContain("resumed-now");
  });

  it("a program that cannot be executed is reported like a shell: 127 missing, 126 not executable, with a line saying why", async () => {
    const missing = await ws.run({ argv: ["/nonexistent/program"], stdio: pty });
    expect(exitOf(missing)).toEqual({ code: 127, signal: null });
    expect(missing.stdout.toString("utf8") + missing.stderr).toMatch(/\/nonexistent\/program: .*(No such file or directory|ENOENT)/);
    const notExecutable = await ws.run({ argv: ["/etc/passwd"], stdio: pty });
    expect(exitOf(notExecutable)).toEqual({ code: 126, signal: null });
    expect(notExecutable.stdout.toString("utf8") + notExecutable.stderr).toMatch(/\/etc\/passwd: .*(Permission denied|EACCES)/);
  });

  it("argv passes exactly, as given", async () => {
    const r = await ws.run({ argv: ["/bin/sh", "-c", 'printf "[%s]" "$0" "$@"', "zero", "a b", "", "λ", "--x=$HOME"], stdio: pty });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.toString("utf8")).toBe("[zero][a b][][λ][--x=$HOME]");
  });

  it("a reader that stops reading holds the terminal's workload back; every byte arrives once it reads again", async () => {
    // ~11 MB: more than every window and buffer between the workload and fd1 together hold.
    const lines = 1_500_000;
    const h = ws.start({ argv: ["/usr/bin/seq", "1", String(lines)], stdio: pty }, { pauseStdout: true });
    await h.waitEvent("started");
    await sleep(1500);
    const blocked = (await ws.processes()).filter((p) => p.command.startsWith("/usr/bin/seq"));
    expect(blocked).toHaveLength(1);
    h.resumeStdout();
    const r = await h.done;
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    const expected = Array.from({ length: lines }, (_, i) => `${i + 1}\n`).join("");
    const got = r.stdout.toString("latin1").replace(/\r\n/g, "\n");
    expect(got.length).toBe(expected.length);
    expect(createHash("sha256").update(got).digest("hex")).toBe(createHash("sha256").update(expected).digest("hex"));
  });

  it("keeps the env off every command line, environment and file but the workload's; a SIGKILLed wrapper leaves neither the workload nor the terminal's owner", async () => {
    const secret = `pty-secret-${randomBytes(8).toString("hex")}`;
    const h = ws.start({ argv: ["/bin/sleep", "61"], env: { PATH: "/usr/bin:/bin", SECRET: secret }, stdio: pty });
    await h.waitEvent("started");
    const workload = (await ws.processes()).filter((p) => p.command === "/bin/sleep 61").map((p) => p.pid);
    expect(workload).toHaveLength(1);
    expect(secretLeaks(secret, ws.configuredRoot, new Set(workload))).toEqual({ argv: [], environ: [], files: [] });
    // The terminal's owner: the workload's parent (the relay, our script child, or pty-attach).
    const view = requireView();
    const owner = view.processes().find((p) => p.pid === workload[0])!.ppid;
    expect(
      view
        .processes()
        .find((p) => p.pid === owner)
        ?.argv.join(" "),
    ).toContain(`${ws.configuredRoot}/agent/`);
    process.kill(-h.child.pid!, "SIGKILL");
    const left = await eventually(
      async () => ({ procs: await ws.processes(), owner: view.processes().some((p) => p.pid === owner) }),
      (x) => x.procs.length === 0 && !x.owner,
      8000,
    );
    expect(left).toEqual({ procs: [], owner: false });
  });

  it("exact env in a PTY too: no TERM, no sshd variables", async () => {
    const r = await ws.run({ argv: ["/usr/bin/env"], env: { ONLY: "this" }, stdio: pty });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.toString("utf8").replace(/\r\n/g, "\n")).toBe("ONLY=this\n");
  });
});

describe("exec, PTY mode, under a long root", unless(needs.pty()), () => {
  // The control socket lives in <root>/run; a Unix socket path must stay under ~104 bytes.
  const ws = new ExecWorkspace(`exec-pty-long-${"r".repeat(70)}`);
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("still attaches the terminal", async () => {
    expect(`${ws.configuredRoot}/run/${"0".repeat(32)}.sock`.length).toBeGreaterThan(108);
    const r = await ws.run({ argv: ["/usr/bin/env"], env: { LONG: "root" }, stdio: { kind: "pty", rows: 24, cols: 80 } });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.toString("utf8")).toBe("LONG=root\r\n");
  });
});
