// Terminals owned by the host process (src/remote-agent/terminal), driven directly on this machine
// (host-side code; the host here is this machine), once per method: python3 running relay.py, and
// util-linux `script` + stty with python3 hidden from the probe. Size before start, resize with
// SIGWINCH, job control, exact argv0/env/cwd, exact wait status, exec failures, the tag
// descriptor, draining at exit and hang-up on close.
import { closeSync, openSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  probeTerminalSupport,
  spawnTerminal,
  startIdleRelay,
  type UsableTerminalSupport,
} from "../../src/remote-agent/terminal/host-terminals.js";
import { alive, collect, killTagHolders, removeScratch, runA21, scratch, scriptOnlyPath, sleep, spec, tagHolders } from "./scenarios.js";
import { needs, skipUnless, unless } from "../support/needs.js";

async function supportFor(method: "python3" | "script"): Promise<UsableTerminalSupport> {
  const s = await probeTerminalSupport(scratch("agent"), method === "script" ? { searchPath: scriptOnlyPath() } : {});
  if (s.method !== method) throw new Error(`expected ${method}, probe says ${JSON.stringify(s)}`);
  return s;
}

/** Group and session of a process; null once it is gone (other processes come and go during a scan). */
const stat = (pid: number) => {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return { pgid: Number(f[2]), sid: Number(f[3]) };
  } catch {
    return null;
  }
};

afterAll(removeScratch);

describe.each(["python3", "script"] as const)("terminal via %s", (method) => {
  const unmet = needs.terminalMethod(method);
  let support: UsableTerminalSupport;
  beforeAll(async () => {
    if (!unmet) support = await supportFor(method);
  });
  beforeEach((ctx) => skipUnless(ctx, unmet));

  it("A21: the initial size is visible before any input; after resize `héllo` comes back with 103x39; exit code 6", async () => {
    const cwd = scratch("cwd");
    const r = await runA21(support, cwd);
    expect(r.beforeInput).toContain(`${cwd}|true|80x24|λ`);
    expect(r.beforeInput).not.toContain("héllo");
    expect(r.resized).toBe(true);
    expect(r.output).toContain("|héllo|103x39");
    expect(r.exit).toEqual({ code: 6, signal: null });
  });

  it("the size is in place before the workload starts: `stty size` as the very first program prints it", async () => {
    const t = await spawnTerminal(support, spec("/usr/bin/stty", ["size"], { rows: 33, cols: 111 }));
    const out = collect(t);
    expect(await t.exited).toEqual({ code: 0, signal: null });
    expect(out.text()).toBe("33 111\r\n");
  });

  it("a resize delivers SIGWINCH to the workload, which then reads the new size", async () => {
    const script =
      "const o=process.stdout;process.on('SIGWINCH',()=>o.write(`winch ${o.columns}x${o.rows}\\n`));o.write('ready\\n');setInterval(()=>{},1000)";
    const t = await spawnTerminal(support, spec(process.execPath, ["-e", script]));
    const out = collect(t);
    await out.wait("ready");
    expect(out.text()).not.toContain("winch");
    expect(await t.resize(39, 103)).toBe(true);
    await out.wait("winch 103x39");
    expect(await t.resize(0, 10)).toBe(false);
    await t.close();
  });

  it("job control: bash -i puts `sleep 100 &` in its own group, `kill %1` ends it; Ctrl-Z stops a foreground job", async () => {
    const t = await spawnTerminal(
      support,
      spec("/bin/bash", ["--norc", "--noprofile", "-i"], { env: { PATH: "/usr/bin:/bin", PS1: "$ " } }),
    );
    const out = collect(t);
    await out.wait("$ ");
    t.input.write("sleep 100 &\n");
    const bg = Number((await out.match(/\[1\] (\d+)\r?\n/))[1]);
    expect(bg).toBeGreaterThan(0);
    expect(stat(bg)).toEqual({ pgid: bg, sid: t.sid });
    t.input.write("kill %1\n");
    for (let i = 0; alive(bg) && i < 500; i++) await sleep(10);
    expect(alive(bg)).toBe(false);
    t.input.write("sleep 200\n");
    let fg = 0;
    for (let i = 0; !fg && i < 500; i++) {
      await sleep(10);
      fg = readdirSync("/proc")
        .filter((n) => /^\d+$/.test(n))
        .map(Number)
        .find((p) => {
          try {
            return readFileSync(`/proc/${p}/cmdline`, "utf8") === "sleep\u0000200\u0000" && stat(p)?.sid === t.sid;
          } catch {
            return false;
          }
        })!;
    }
    expect(fg).toBeGreaterThan(0);
    t.input.write("\x1a");
    await out.wait("Stopped");
    t.input.write("kill -9 %%\n");
    for (let i = 0; alive(fg) && i < 500; i++) await sleep(10);
    expect(alive(fg)).toBe(false);
    // bash refuses to exit while it still lists a stopped job, and it may not reap the killed one
    // on its own while it sits at the prompt (bash 5.2 left it a zombie through 50 prompts, under
    // either terminal owner, about one run in 50 under load). A foreground command makes it wait
    // for children, which reaps the dead job too: it then reports the kill before its next prompt.
    t.input.write("/bin/true\n");
    await out.wait("Killed");
    t.input.write("exit 7\n");
    expect(await t.exited).toEqual({ code: 7, signal: null });
    expect(out.text()).not.toMatch(/no job control|cannot set terminal process group/);
    expect(out.text()).toContain("Terminated");
  });

  it("argv0, env and cwd are exactly as given: /usr/bin/env prints only the given variables, no TERM", async () => {
    const env = await spawnTerminal(support, spec("/usr/bin/env", [], { env: { ONLY: "x", UTF: "λ é" } }));
    const envOut = collect(env);
    expect(await env.exited).toEqual({ code: 0, signal: null });
    expect(envOut.text()).toBe("ONLY=x\r\nUTF=λ é\r\n");

    const cwd = scratch("cwd");
    const show = "console.log(JSON.stringify([process.argv0,process.cwd(),process.env]))";
    const node = await spawnTerminal(support, spec(process.execPath, ["-e", show], { argv0: "custom-argv0", cwd, env: { A: "1" } }));
    const nodeOut = collect(node);
    expect(await node.exited).toEqual({ code: 0, signal: null });
    expect(JSON.parse(nodeOut.text())).toEqual(["custom-argv0", cwd, { A: "1" }]);
  });

  it("the wait status is exact: an exit code, or the name of the signal that ended the workload", async () => {
    const code = await spawnTerminal(support, spec("/bin/sh", ["-c", "exit 3"]));
    expect(await code.exited).toEqual({ code: 3, signal: null });
    const high = await spawnTerminal(support, spec("/bin/sh", ["-c", "exit 143"]));
    expect(await high.exited).toEqual({ code: 143, signal: null });
    const self = await spawnTerminal(support, spec("/bin/sh", ["-c", "kill -HUP $$"]));
    expect(await self.exited).toEqual({ code: null, signal: "SIGHUP" });
    for (const sig of ["SIGTERM", "SIGKILL"] as const) {
      const t = await spawnTerminal(support, spec("/bin/sleep", ["30"]));
      expect(t.signal(sig)).toBe(true);
      expect(await t.exited).toEqual({ code: null, signal: sig });
      expect(alive(t.pid!)).toBe(false);
    }
  });

  it("exec failures are reported like a shell: 127 for a missing program, 126 for one that cannot run", async () => {
    const missing = await spawnTerminal(support, spec("/nonexistent/program", []));
    const missingOut = collect(missing);
    expect(missing.pid).toBeNull();
    expect(missing.spawnError).toEqual({ code: 127, message: "No such file or directory" });
    expect(await missing.exited).toEqual({ code: 127, signal: null });
    expect(missingOut.text()).toContain("paseo-ssh-runtime: /nonexistent/program: No such file or directory");

    const file = join(scratch("noexec"), "not-executable");
    writeFileSync(file, "#!/bin/sh\n", { mode: 0o644 });
    const denied = await spawnTerminal(support, spec(file, []));
    expect(denied.spawnError).toEqual({ code: 126, message: "Permission denied" });
    expect(await denied.exited).toEqual({ code: 126, signal: null });
  });

  it("the tag is the workload's fd 47; no relay process holds an fd 47", async () => {
    const tagPath = join(scratch("tag"), "exec.tag");
    const tagFd = openSync(tagPath, "w", 0o600);
    const t = await spawnTerminal(support, spec("/bin/sleep", ["30"], { tagFd }));
    closeSync(tagFd);
    expect(readlinkSync(`/proc/${t.pid}/fd/47`)).toBe(tagPath);
    expect(tagHolders(tagPath)).toEqual([t.pid]);
    // Everything between the driver and the workload: the relay and (script) its descendants.
    const relayTree = readdirSync("/proc")
      .filter((n) => /^\d+$/.test(n))
      .map(Number)
      .filter((p) => p === t.relayPid || (p !== t.pid && [t.sid, t.relayPid].includes(stat(p)?.sid ?? -1)));
    expect(relayTree).toContain(t.relayPid);
    for (const p of relayTree) expect(readdirSync(`/proc/${p}/fd`)).not.toContain("47");
    if (method === "script") expect(relayTree).toContain(t.sid); // our child under script
    if (method === "python3") {
      const links = readdirSync(`/proc/${t.relayPid}/fd`).map((fd) => readlinkSync(`/proc/${t.relayPid}/fd/${fd}`));
      expect(links).not.toContain(tagPath);
    }
    expect(t.signal("SIGKILL")).toBe(true);
    await t.exited;
  });

  it("output written just before the exit is all delivered; a background holder of the terminal does not keep it open", async () => {
    const t = await spawnTerminal(
      support,
      spec("/bin/sh", ["-c", "head -c 300000 /dev/zero | tr '\\0' a; exit 3"], { env: { PATH: "/usr/bin:/bin" } }),
    );
    const out = collect(t);
    expect(await t.exited).toEqual({ code: 3, signal: null });
    expect(out.text()).toBe("a".repeat(300000));

    const bg = await spawnTerminal(
      support,
      spec("/bin/sh", ["-c", "trap '' HUP; sleep 30 & echo bye"], { env: { PATH: "/usr/bin:/bin" } }),
    );
    const bgOut = collect(bg);
    expect(await bg.exited).toEqual({ code: 0, signal: null });
    expect(bgOut.text()).toBe("bye\r\n");
  });

  it("close() hangs the terminal up: a session that ignores SIGHUP is killed, nothing is left", async () => {
    const tagPath = join(scratch("tag"), "exec.tag");
    const tagFd = openSync(tagPath, "w", 0o600);
    const t = await spawnTerminal(
      support,
      spec("/bin/sh", ["-c", "trap '' HUP; sleep 1000 & echo started; wait"], { env: { PATH: "/usr/bin:/bin" }, tagFd }),
    );
    closeSync(tagFd);
    try {
      await collect(t).wait("started");
      expect(tagHolders(tagPath)).toHaveLength(2);
      await t.close();
      expect(await t.exited).toEqual({ code: null, signal: "SIGKILL" });
      expect(tagHolders(tagPath)).toEqual([]);
      expect(alive(t.relayPid)).toBe(false);
    } finally {
      killTagHolders(tagPath);
    }
  });
});

describe("a relay started ahead of its exec (python3)", unless(needs.terminalMethod("python3")), () => {
  let support: Extract<UsableTerminalSupport, { method: "python3" }>;
  beforeAll(async () => {
    support = (await supportFor("python3")) as typeof support;
  });

  it("serves the exec it is given: size in place before the start, the tag opened by path as the workload's fd 47 only", async () => {
    const idle = startIdleRelay(support)!;
    expect(idle.usable).toBe(true);
    // Waiting for its launch, it holds nothing of any exec (its argv is the relay's alone).
    expect(readFileSync(`/proc/${idle.pid}/cmdline`, "utf8").split("\0").filter(Boolean)).toEqual([
      support.python,
      "-I",
      "-S",
      support.relay,
    ]);
    const tagPath = join(scratch("tag"), "exec.tag");
    writeFileSync(tagPath, "", { mode: 0o600 });
    const t = await spawnTerminal(
      support,
      spec("/bin/sh", ["-c", "stty size; exec sleep 30"], { env: { PATH: "/usr/bin:/bin" }, rows: 33, cols: 101, tagPath }),
      idle,
    );
    expect(t.relayPid).toBe(idle.pid);
    expect(idle.usable).toBe(false);
    await collect(t).wait("33 101");
    // stty (a child of sh holding fd 47 too) prints before it exits: sh has waited for it once it is sleep.
    const until = Date.now() + 10_000;
    while (readFileSync(`/proc/${t.pid}/comm`, "utf8").trim() !== "sleep" && Date.now() < until) await sleep(10);
    expect(readlinkSync(`/proc/${t.pid}/fd/47`)).toBe(tagPath);
    expect(tagHolders(tagPath)).toEqual([t.pid]);
    const links = readdirSync(`/proc/${t.relayPid}/fd`).map((fd) => readlinkSync(`/proc/${t.relayPid}/fd/${fd}`));
    expect(links).not.toContain(tagPath);
    expect(t.signal("SIGKILL")).toBe(true);
    expect(await t.exited).toEqual({ code: null, signal: "SIGKILL" });
  });

  it("one that ended before it was needed is not used: a new relay starts the exec", async () => {
    const idle = startIdleRelay(support)!;
    idle.discard();
    while (alive(idle.pid!)) await sleep(10);
    const tagPath = join(scratch("tag"), "exec.tag");
    const tagFd = openSync(tagPath, "w", 0o600);
    const t = await spawnTerminal(support, spec("/bin/sh", ["-c", "exit 4"], { tagFd, tagPath }), idle);
    closeSync(tagFd);
    expect(t.relayPid).not.toBe(idle.pid);
    expect(await t.exited).toEqual({ code: 4, signal: null });
  });
});
