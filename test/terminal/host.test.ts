// The terminal driver in a child node process (test/terminal/harness.ts), as root and as the rig's
// non-root login user: the controller (driver) SIGKILLed leaves no workload process behind, A21 as
// an ordinary user, 100 MB through a terminal both ways with bounded memory, and backpressure
// when nobody reads (output) or the workload does not read (input).
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { chownSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { probeTerminalSupport, spawnTerminal, type UsableTerminalSupport } from "../../src/remote-agent/terminal/host-terminals.js";
import { rig } from "../rig/rig.js";
import { bundleHarness } from "./bundle.js";
import {
  alive,
  collect,
  killTagHolders,
  patternChunk,
  peakRssKb,
  removeScratch,
  scratch,
  scriptOnlyPath,
  sleep,
  spec,
  tagHolders,
  type A21Result,
  type EchoResult,
} from "./scenarios.js";
import { NEEDS, needs, unless } from "../support/needs.js";

const user = rig().user;
/** The harness runs as the rig's login user through runuser: root, and a login user that is not root. */
const otherUser =
  needs.root("runs the terminal driver as the rig's login user (runuser)") ??
  (user === "root" ? `${NEEDS}a non-root login user: the rig logs in as root` : null);

interface Harness {
  /** Resolves with the first JSON line the harness prints. */
  first: Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
}

afterAll(removeScratch);

describe("terminal driver in a child process", () => {
  let harness: string;
  const running = new Set<ChildProcess>();
  beforeAll(async () => {
    harness = await bundleHarness();
  });
  // A failed or timed-out test must not leave its harness (and so its terminal) running.
  afterEach(() => {
    for (const child of running) {
      try {
        process.kill(-child.pid!, "SIGKILL"); // its group: runuser and node
      } catch {
        // gone meanwhile
      }
    }
    running.clear();
  });

  /** Runs the harness, as `runAs` (via runuser) when given; its agent dir and files are theirs. */
  function start(command: string, args: Record<string, unknown>, runAs?: string): Harness {
    const argv = [process.execPath, harness, command, JSON.stringify(args)];
    const [cmd, ...rest] = runAs ? ["runuser", "-u", runAs, "--", ...argv] : argv;
    const child = spawn(cmd!, rest, { detached: true });
    running.add(child);
    child.on("exit", () => running.delete(child));
    let out = "";
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString("utf8")));
    const first = new Promise<Record<string, unknown>>((resolve, reject) => {
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString("utf8");
        const nl = out.indexOf("\n");
        if (nl >= 0) resolve(JSON.parse(out.slice(0, nl)) as Record<string, unknown>);
      });
      child.on("exit", (code) => reject(new Error(`harness ${command} exited ${code}: ${err}`)));
    });
    first.catch(() => undefined);
    return { first, exited: new Promise((resolve) => child.on("exit", (code) => resolve(code))) };
  }

  /** A scratch directory owned by `owner` (root when undefined). */
  function dirFor(label: string, owner?: string): string {
    const dir = scratch(label);
    if (owner) {
      const id = Number(execFileSync("id", ["-u", owner], { encoding: "utf8" }).trim());
      const gid = Number(execFileSync("id", ["-g", owner], { encoding: "utf8" }).trim());
      chownSync(dir, id, gid);
    }
    return dir;
  }

  async function controllerDies(method: "python3" | "script", runAs?: string): Promise<void> {
    const tagDir = dirFor("tag", runAs);
    const tagPath = join(tagDir, "exec.tag");
    const h = start(
      "hold",
      {
        agentDir: dirFor("agent", runAs),
        ...(method === "script" ? { searchPath: scriptOnlyPath() } : {}),
        tagPath,
        // Ignores SIGHUP, as does its child: the kernel's hang-up alone would leave both running.
        script: "trap '' HUP; sleep 1000 & echo started; wait",
      },
      runAs,
    );
    const who = (await h.first) as { driver: number; relay: number; pid: number };
    try {
      expect(tagHolders(tagPath)).toHaveLength(2);
      process.kill(who.driver, "SIGKILL");
      await h.exited;
      for (let i = 0; i < 1000 && (tagHolders(tagPath).length > 0 || alive(who.relay)); i++) await sleep(10);
      expect(tagHolders(tagPath)).toEqual([]);
      expect(alive(who.pid)).toBe(false);
      expect(alive(who.relay)).toBe(false);
    } finally {
      killTagHolders(tagPath);
    }
  }

  const checkA21 = (r: A21Result, cwd: string) => {
    expect(r.beforeInput).toContain(`${cwd}|true|80x24|λ`);
    expect(r.resized).toBe(true);
    expect(r.output).toContain("|héllo|103x39");
    expect(r.exit).toEqual({ code: 6, signal: null });
  };

  for (const method of ["python3", "script"] as const) {
    it(
      `${method}: the driver SIGKILLed → the relay hangs up and kills the session; nothing is left`,
      unless(needs.terminalMethod(method)),
      async () => {
        await controllerDies(method);
      },
    );

    it(`${method}, as the rig's non-root user: A21 size probe`, unless(otherUser, needs.terminalMethod(method)), async () => {
      const cwd = dirFor("cwd", user);
      const r = (await start(
        "a21",
        { agentDir: dirFor("agent", user), cwd, ...(method === "script" ? { searchPath: scriptOnlyPath() } : {}) },
        user,
      ).first) as unknown as A21Result;
      checkA21(r, cwd);
    });

    it(
      `${method}, as the rig's non-root user: the driver SIGKILLed leaves nothing behind`,
      unless(otherUser, needs.terminalMethod(method)),
      async () => {
        await controllerDies(method, user);
      },
    );
  }

  it(
    "python3: 100 MB in and 100 MB echoed back through a raw terminal, byte-exact, with bounded memory",
    unless(needs.terminalMethod("python3")),
    async () => {
      const total = 100 * 1024 * 1024;
      const r = (await start("echo", { agentDir: dirFor("agent"), total }).first) as unknown as EchoResult;
      expect(r.echoedBytes).toBe(total);
      expect(r.echoedSha).toBe(r.sentSha);
      // python itself is ~10 MiB; one 64 KiB chunk per direction is all the relay holds.
      expect(r.relayPeakKb).toBeLessThan(40 * 1024);
      // node itself is ~50 MiB; the driver only passes sockets through.
      expect(r.driverPeakKb).toBeLessThan(160 * 1024);
    },
  );
});

describe("terminal backpressure (python3)", unless(needs.terminalMethod("python3")), () => {
  let support: UsableTerminalSupport;
  beforeAll(async () => {
    const s = await probeTerminalSupport(scratch("agent"));
    if (s.method !== "python3") throw new Error(`python3 expected: ${JSON.stringify(s)}`);
    support = s;
  });

  const written = (pid: number) => Number(/^wchar: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, "utf8"))![1]);

  it("nobody reading the output holds the workload back; reading later delivers every byte", async () => {
    const total = 50_000_000;
    const t = await spawnTerminal(
      support,
      spec("/bin/sh", ["-c", `stty raw && exec head -c ${total} /dev/zero`], { env: { PATH: "/usr/bin:/bin" } }),
    );
    // Not reading: wait until the workload stops making progress.
    let last = -1;
    for (let still = 0, i = 0; still < 10 && i < 1000; i++) {
      await sleep(20);
      const now = written(t.pid!);
      still = now === last ? still + 1 : 0;
      last = now;
    }
    // Measured ~80 KiB: the pty buffer plus one chunk in the relay and the socket buffers.
    expect(last).toBeLessThan(2 * 1024 * 1024);
    expect(peakRssKb(t.relayPid)).toBeLessThan(40 * 1024);
    let got = 0;
    t.output.on("data", (d: Buffer) => (got += d.length));
    expect(await t.exited).toEqual({ code: 0, signal: null });
    await new Promise((r) => (t.output.readableEnded ? r(null) : t.output.once("end", r)));
    expect(got).toBe(total);
  });

  it("a workload that does not read holds input back (write() stays false); once it reads, every byte arrives", async () => {
    const total = 32 * 1024 * 1024;
    const t = await spawnTerminal(
      support,
      spec("/bin/sh", ["-c", `stty raw -echo && echo ready && head -c ${total} | sha256sum`], { env: { PATH: "/usr/bin:/bin" } }),
    );
    const out = collect(t);
    await out.wait("ready");
    expect(t.signal("SIGSTOP")).toBe(true);
    const hash = createHash("sha256");
    let sent = 0;
    let i = 0;
    const next = () => {
      const chunk = patternChunk(i++, Math.min(65536, total - sent));
      hash.update(chunk);
      sent += chunk.length;
      return t.input.write(chunk);
    };
    // Write until the relay stops taking input: no 'drain' for a second while the workload is stopped.
    for (;;) {
      while (sent < total && next());
      if (sent >= total) break;
      const drained = await Promise.race([new Promise((r) => t.input.once("drain", () => r(true))), sleep(1000).then(() => false)]);
      if (!drained) break;
    }
    // Measured ~320 KiB: socket buffers, one chunk in the relay, the terminal's input queue.
    expect(sent).toBeLessThan(2 * 1024 * 1024);
    expect(peakRssKb(t.relayPid)).toBeLessThan(40 * 1024);
    expect(t.signal("SIGCONT")).toBe(true);
    while (sent < total) {
      if (!next()) await new Promise((r) => t.input.once("drain", r));
    }
    expect(await t.exited).toEqual({ code: 0, signal: null });
    expect(out.text()).toContain(hash.digest("hex"));
  });
});
