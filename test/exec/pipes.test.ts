// Pipes-mode exec over the real sshd (docs/contract.md#scenarios A15, A16, A19, A26, I1,
// C2, S3):
// exact bytes both ways, exact env, real exit status, cwd confinement, signal forwarding.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecWorkspace, eventually, exitOf, expectRunsIn, newExecId, secretLeaks, sleep } from "../support/exec.js";
import { needs, skipUnless } from "../support/needs.js";
import { rig } from "../rig/rig.js";
import { onHost, requireView } from "../support/host-view.js";

describe("exec, pipes mode, over SSH", () => {
  const ws = new ExecWorkspace("exec-pipes");
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("A15: stdin reaches the workload, stderr and exit code come back exactly", async () => {
    const r = await ws.run(
      { argv: ["/bin/sh", "-c", "cat > runtime-owned.txt; printf runtime-stderr >&2; exit 19"] },
      { stdin: "docker-state" },
    );
    expect(exitOf(r)).toEqual({ code: 19, signal: null });
    expect(r.stderr).toBe("runtime-stderr");
    expect(r.stdout.length).toBe(0);
    expect(r.code).toBe(19);
    expect(readFileSync(onHost(join(ws.root, "runtime-owned.txt")), "utf8")).toBe("docker-state");
    const cat = await ws.run({ argv: ["/bin/cat", "runtime-owned.txt"] });
    expect(exitOf(cat)).toEqual({ code: 0, signal: null });
    expect(cat.stdout.toString()).toBe("docker-state");
  });

  it("A16: the workload gets exactly the envelope env", async () => {
    const r = await ws.run({ argv: ["/usr/bin/env"], env: { RUNTIME_EXACT_ENV: "docker" } });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.toString()).toBe("RUNTIME_EXACT_ENV=docker\n");
  });

  it("raw bytes: NUL, invalid UTF-8 and stdin EOF pass unchanged", async () => {
    const script =
      "process.stdin.on('data',d=>process.stdout.write(d));process.stdin.on('end',()=>{process.stdout.write(Buffer.from([0,0x6f,0x75,0x74,0xff]));process.stderr.write(Buffer.from([0x65,0x72,0x72,0]));})";
    const r = await ws.run({ argv: [rig().remoteNode, "-e", script] }, { stdin: Buffer.from("raw\0stdin\n") });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout).toEqual(Buffer.concat([Buffer.from("raw\0stdin\n"), Buffer.from([0, 0x6f, 0x75, 0x74, 0xff])]));
    expect(Buffer.from(r.stderr, "utf8").subarray(0, 3).toString()).toBe("err");
  });

  it.each([[1024 * 1024 + 12345], [12 * 1024 * 1024 + 7]])("%i bytes of binary data round-trip byte-exactly through cat", async (size) => {
    const data = randomBytes(size);
    const r = await ws.run({ argv: ["/bin/cat"] }, { stdin: data });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.length).toBe(data.length);
    expect(r.stdout.equals(data)).toBe(true);
  });

  it("a reader that stops reading fd1 holds the workload back (end-to-end backpressure), nothing is lost", async () => {
    const total = 40 * 1024 * 1024;
    const h = ws.start(
      { argv: ["/bin/sh", "-c", `head -c ${total} /dev/zero; echo finished-writing >&2`], env: { PATH: "/usr/bin:/bin" } },
      { pauseStdout: true },
    );
    await sleep(2500);
    expect(h.stderrText()).not.toContain("finished-writing");
    h.resumeStdout();
    const r = await h.done;
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.length).toBe(total);
    expect(r.stderr).toBe("finished-writing\n");
  });

  it("a workload that never reads stdin still gets forwarded signals while stdin is flooded", async () => {
    const h = ws.start({ argv: ["/bin/sh", "-c", "echo ready; exec sleep 30"], env: { PATH: "/usr/bin:/bin" } }, { keepStdinOpen: true });
    await h.waitOutput("ready");
    h.stdin.write(randomBytes(10 * 1024 * 1024));
    await sleep(500);
    const t0 = Date.now();
    h.child.kill("SIGTERM");
    const r = await h.done;
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(exitOf(r)).toEqual({ code: null, signal: "SIGTERM" });
  });

  it("a signal death is reported as the signal, never as 128+n", async () => {
    const r = await ws.run({ argv: ["/bin/sh", "-c", "kill -TERM $$"] });
    expect(exitOf(r)).toEqual({ code: null, signal: "SIGTERM" });
    expect(r.signal).toBe("SIGTERM");
  });

  it("A26: SIGTERM to the wrapper reaches the whole group within 5 s", async () => {
    const h = ws.start({ argv: ["/bin/sh", "-c", "sleep 30 & echo ready; wait"], env: { PATH: "/usr/bin:/bin" } });
    await h.waitOutput("ready");
    const t0 = Date.now();
    h.child.kill("SIGTERM");
    const r = await h.done;
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(exitOf(r)).toEqual({ code: null, signal: "SIGTERM" });
    const left = await eventually(
      () => ws.processes(),
      (p) => !p.some((x) => x.command.includes("sleep 30")),
    );
    expect(left.filter((x) => x.command.includes("sleep 30"))).toEqual([]);
  });

  it("a descendant holding stdout open does not hold up eof/exit, and no output is cut", async () => {
    const t0 = Date.now();
    const r = await ws.run({
      argv: ["/bin/sh", "-c", "sleep 35 & head -c 300000 /dev/zero; echo main-done"],
      env: { PATH: "/usr/bin:/bin" },
    });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(r.stdout.length).toBe(300000 + "main-done\n".length);
    expect(r.stdout.subarray(300000).toString()).toBe("main-done\n");
    expect(Date.now() - t0).toBeLessThan(8000);
    // The descendant keeps running as part of the workspace (reaped by destroy, frozen by pause).
    const procs = await ws.processes();
    const sleeper = procs.filter((p) => p.command.includes("sleep 35"));
    expect(sleeper.length).toBe(1);
    requireView().kill(sleeper[0]!.pid, "SIGKILL");
  });

  it("C2: an exit right at `started` is never lost", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await ws.run({ argv: ["/bin/true"] });
      expect(exitOf(r)).toEqual({ code: 0, signal: null });
    }
  });

  it("a bare name resolves on the envelope PATH only; not found is exit 127", async () => {
    const ok = await ws.run({ argv: ["true"], env: { PATH: "/usr/bin:/bin" } });
    expect(exitOf(ok)).toEqual({ code: 0, signal: null });
    const missing = await ws.run({ argv: ["definitely-not-a-command-xyz"], env: { PATH: "/usr/bin:/bin" } });
    expect(exitOf(missing)).toEqual({ code: 127, signal: null });
    expect(missing.stderr).toContain("command not found");
  });

  it("a program that cannot be executed reports 126 like a shell", async () => {
    const r = await ws.run({ argv: ["./committed.txt"] });
    expect(exitOf(r)).toEqual({ code: 126, signal: null });
    expect(r.stderr).toContain("./committed.txt");
  });

  it.each([["/tmp"], ["../x"], ["..\\x"], ["outside-link"]])("cwd %s is refused with no fd4 event and nothing launched", async (cwd) => {
    const r = await ws.run({ argv: ["/bin/sh", "-c", "touch escaped-marker"], cwd });
    expect(r.stderr).toContain("Workspace cwd escapes its runtime root");
    expect(r.code).not.toBe(0);
    expect(r.fd4).toBe("");
  });

  it("an absolute cwd inside the root runs there: the root itself and <root>/src (Paseo's client sends these)", async () => {
    expect(exitOf(await ws.run({ argv: ["/bin/mkdir", "-p", "src"] }))).toEqual({ code: 0, signal: null });
    await expectRunsIn(ws, [
      [ws.root, ws.root],
      [`${ws.root}/src`, `${ws.root}/src`],
      [`${ws.root}/src/..`, ws.root],
    ]);
  });

  it("I1: a symlinked directory leading out of the root is refused after realpath", async () => {
    const link = await ws.run({ argv: ["/bin/ln", "-s", "..", "escape"] });
    expect(exitOf(link)).toEqual({ code: 0, signal: null });
    const r = await ws.run({ argv: ["/bin/sh", "-c", "touch escaped-marker"], cwd: "escape" });
    expect(r.stderr).toContain("Workspace cwd escapes its runtime root");
    expect(r.fd4).toBe("");
    const check = await ws.run({ argv: ["/bin/sh", "-c", "test ! -e ../escaped-marker"] });
    expect(exitOf(check)).toEqual({ code: 0, signal: null });
  });

  it("concurrent execs in one workspace keep their streams and results apart", async () => {
    const runs = await Promise.all(
      Array.from({ length: 6 }, (_, i) => ws.run({ argv: ["/bin/sh", "-c", `printf out-${i}; printf err-${i} >&2; exit ${i}`] })),
    );
    runs.forEach((r, i) => {
      expect(exitOf(r)).toEqual({ code: i, signal: null });
      expect(r.stdout.toString()).toBe(`out-${i}`);
      expect(r.stderr).toBe(`err-${i}`);
    });
  });

  it("any non-empty exec id is accepted and confined (hashed into the record name)", async () => {
    const execId = `../../${newExecId()}\n x/y`;
    const r = await ws.run({ argv: ["/bin/true"], execId });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect((await ws.signal(execId, "SIGKILL")).code).toBe(0);
  });

  it("an exec id is never reused", async () => {
    const execId = newExecId();
    expect(exitOf(await ws.run({ argv: ["/bin/true"], execId }))).toEqual({ code: 0, signal: null });
    const again = await ws.run({ argv: ["/bin/true"], execId });
    expect(again.fd4).toBe("");
    expect(again.stderr).toContain("already used");
  });

  it("an exec for another runtime instance is refused with the owner mismatch text, nothing launched", async () => {
    const foreign = ws
      .envelope({ argv: ["/bin/sh", "-c", "touch foreign-marker"] }, newExecId())
      .replace(/"runtimeInstanceId":"[0-9a-f]{64}"/, `"runtimeInstanceId":"${"f".repeat(64)}"`);
    const r = await ws.run({ argv: ["/bin/true"] }, { rawEnvelope: foreign });
    expect(r.code).not.toBe(0);
    expect(r.fd4).toBe("");
    expect(r.stderr).toContain("SSH workspace runtime owner mismatch");
    expect(existsSync(onHost(join(ws.root, "foreign-marker")))).toBe(false);
  });

  it.each([
    ["a NUL byte in argv", { argv: ["/bin/echo", "a\u0000b"] }, /argv\[1\] contains a NUL byte/],
    ["an env name with =", { argv: ["/usr/bin/env"], env: { "A=B": "c" } }, /env name "A=B" cannot be passed/],
    ["a NUL byte in an env value", { argv: ["/bin/true"], env: { A: "b\u0000c" } }, /env A contains a NUL byte/],
  ])("%s is refused with one clear line, nothing launched, and signal answers 0", async (_name, spec, text) => {
    const execId = newExecId();
    const r = await ws.run({ ...spec, execId });
    expect(r.code).not.toBe(0);
    expect(r.fd4).toBe("");
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(text);
    expect((await ws.signal(execId, "SIGKILL")).code).toBe(0);
  });

  it("an invalid envelope is refused before anything is launched", async () => {
    const bad = ws.envelope({ argv: ["/bin/true"] }, newExecId()).replace('"type":"spawn",', '"type":"spawn","root":"/private",');
    const r = await ws.run({ argv: ["/bin/true"] }, { rawEnvelope: bad });
    expect(r.code).not.toBe(0);
    expect(r.fd4).toBe("");
    expect(r.stderr).toMatch(/unrecognized key/i);
  });

  it.for([["pipes"], ["pty"]])(
    "S3 (%s): a secret env value appears in no argv, no other environment, no file under the root",
    async ([mode], ctx) => {
      if (mode === "pty") skipUnless(ctx, needs.pty());
      const secret = `s3cr3t-${randomBytes(12).toString("hex")}`;
      const stdio = mode === "pty" ? { kind: "pty" as const, rows: 24, cols: 80 } : { kind: "pipes" as const };
      const h = ws.start({ argv: ["/bin/sh", "-c", "echo ready; sleep 5"], env: { SECRET_TOKEN: secret, PATH: "/usr/bin:/bin" }, stdio });
      await h.waitOutput("ready");
      const workload = new Set((await ws.processes()).map((p) => p.pid));
      expect(workload.size).toBeGreaterThan(0);
      expect(secretLeaks(secret, ws.configuredRoot, workload)).toEqual({ argv: [], environ: [], files: [] });
      h.sendControl({ type: "signal", protocolVersion: 1, signal: "SIGTERM" });
      h.child.kill("SIGTERM");
      await h.done;
    },
  );
});
