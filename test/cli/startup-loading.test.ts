// What each runtime process loads, seen from inside the real executable: a preload (NODE_OPTIONS
// --import) logs every ES module the process resolves, every file it reads with readFileSync (how
// operation bundles are loaded) and, at exit, every CommonJS module it required; a second,
// hook-free preload (its own runs: the hooks bring node built-ins of their own) logs the node
// built-ins the process loaded. `describe` must load no operation bundle, no zod, commander or
// ssh2, and not node's net or stream modules (making process.stdout on a pipe would); `exec` and
// `signal` through the broker must load neither commander, ssh2, node:child_process nor node:crypto, and their
// bundles hold only the contract schemas they use. Each detector is shown to fire on a process
// that does load the thing (an argv refusal loads commander, `--help` writes through
// process.stdout, an in-process connection loads ssh2, node:child_process and node:crypto, any other operation
// its bundle and every contract schema).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { ExecWorkspace, exitOf } from "../support/exec.js";
import { lifecycleRequest, runCli } from "../support/run-cli.js";
import { needs, skipUnless } from "../support/needs.js";
import { SYSTEM_CONFIG } from "../../src/transport/ssh-config/ssh-g.js";

const dir = suite("all").tmp("paseo-loading-");
let runs = 0;

beforeAll(() => {
  writeFileSync(
    join(dir, "hooks.mjs"),
    [
      'import { appendFileSync } from "node:fs";',
      "let log;",
      "export function initialize(data) { log = data.log; }",
      "export async function resolve(specifier, context, next) {",
      "  const r = await next(specifier, context);",
      "  appendFileSync(log, `esm ${r.url}\\n`);",
      "  return r;",
      "}",
    ].join("\n"),
  );
  writeFileSync(
    join(dir, "builtins.cjs"),
    [
      'const { appendFileSync } = require("node:fs");',
      "const log = process.env.PASEO_LOADING_LOG;",
      'if (log && process.argv[1]?.endsWith("cli.js")) {',
      "  const before = new Set(process.moduleLoadList);",
      '  process.on("exit", () => appendFileSync(log, process.moduleLoadList.filter((m) => !before.has(m) && m.startsWith("NativeModule ")).map((m) => `builtin ${m.slice(13)}\\n`).join("") + "builtins-logged\\n"));',
      "}",
    ].join("\n"),
  );
  writeFileSync(
    join(dir, "trace.mjs"),
    [
      'import fs, { appendFileSync } from "node:fs";',
      'import { createRequire, register } from "node:module";',
      "const log = process.env.PASEO_LOADING_LOG;",
      // Only the runtime executable: a broker it starts inherits NODE_OPTIONS.
      'if (log && process.argv[1]?.endsWith("cli.js")) {',
      '  register("./hooks.mjs", import.meta.url, { data: { log } });',
      "  const readFileSync = fs.readFileSync;",
      "  fs.readFileSync = function (path, ...rest) {",
      '    if (typeof path === "string") appendFileSync(log, `read ${path}\\n`);',
      "    return readFileSync.call(this, path, ...rest);",
      "  };",
      "  const cache = createRequire(import.meta.url).cache;",
      '  process.on("exit", () => appendFileSync(log, Object.keys(cache).map((f) => `cjs ${f}\\n`).join("")));',
      "}",
    ].join("\n"),
  );
});

/** A fresh log and the env that makes the executable write it. */
function traced(): { env: NodeJS.ProcessEnv; loaded: () => Loaded } {
  const log = join(dir, `run-${runs++}.log`);
  writeFileSync(log, "");
  const env = { ...process.env, PASEO_LOADING_LOG: log, NODE_OPTIONS: `--import=${pathToFileURL(join(dir, "trace.mjs")).href}` };
  return { env, loaded: () => new Loaded(readFileSync(log, "utf8")) };
}

/** Like traced(), for the node built-ins the executable loads (no hooks, which load their own). */
function tracedBuiltins(): { env: NodeJS.ProcessEnv; loaded: () => Loaded } {
  const log = join(dir, `run-${runs++}.log`);
  writeFileSync(log, "");
  const env = { ...process.env, PASEO_LOADING_LOG: log, NODE_OPTIONS: `--require=${join(dir, "builtins.cjs")}` };
  return { env, loaded: () => new Loaded(readFileSync(log, "utf8")) };
}

class Loaded {
  readonly esm: string[];
  readonly cjs: string[];
  readonly reads: string[];
  readonly builtins: string[];
  private readonly builtinsLogged: boolean;
  constructor(text: string) {
    const lines = text.split("\n").filter(Boolean);
    const kind = (k: string) => lines.filter((l) => l.startsWith(`${k} `)).map((l) => l.slice(k.length + 1));
    this.esm = kind("esm");
    this.cjs = kind("cjs");
    this.reads = kind("read");
    this.builtins = kind("builtin");
    this.builtinsLogged = lines.includes("builtins-logged");
  }

  /** A node built-in (`net`, `child_process`) loaded by the executable (tracedBuiltins runs). */
  builtin(name: string): boolean {
    if (!this.builtinsLogged) throw new Error("no built-ins were logged: not a tracedBuiltins() run?");
    return this.builtins.includes(name);
  }

  /** The contract schema modules in the process's bundles (esbuild names each source file). */
  schemaModules(): string[] {
    const names = ["schema-base", "exec-schemas", "lifecycle-schemas", "schemas"];
    return names.filter((n) => this.ours().some((t) => t.includes(`// src/contract/${n}.ts\n`)));
  }

  /** Files of dist/ the process ran, however they were loaded. */
  dist(): string[] {
    const files = [...this.esm.filter((u) => u.startsWith("file:")).map((u) => fileURLToPath(u)), ...this.cjs, ...this.reads];
    return [...new Set(files.filter((f) => f.includes("/dist/") && /\.(c|m)?js$/.test(f)))];
  }

  private ours(): string[] {
    return this.dist().map((f) => readFileSync(f, "utf8"));
  }

  package(name: string): boolean {
    const marker = `/node_modules/${name}/`;
    return this.esm.some((u) => u.includes(marker)) || this.cjs.some((f) => f.includes(marker));
  }

  /** zod is bundled: esbuild names its source files in the chunk that holds it. */
  zod(): boolean {
    return this.ours().some((t) => t.includes("// node_modules/zod/"));
  }

  /** An operation bundle (dist/ops/*.cjs), read by src/cli/op-bundle.ts. */
  opBundle(): boolean {
    return this.reads.some((f) => f.includes("/dist/ops/"));
  }
}

describe("modules each operation loads", () => {
  it("describe: the dispatcher only, no operation bundle, zod, commander or ssh2", async () => {
    const t = traced();
    const r = await runCli(["describe"], { env: t.env });
    expect(r.code).toBe(0);
    const loaded = t.loaded();
    expect(loaded.dist().some((f) => f.endsWith("/dist/cli.js"))).toBe(true);
    expect(loaded.opBundle()).toBe(false);
    expect(loaded.zod()).toBe(false);
    expect(loaded.package("commander")).toBe(false);
    expect(loaded.package("ssh2")).toBe(false);

    const b = tracedBuiltins();
    expect((await runCli(["describe"], { env: b.env })).code).toBe(0);
    expect(b.loaded().builtin("net")).toBe(false);
    expect(b.loaded().builtin("stream")).toBe(false);
  });

  it("the detectors fire: an argv refusal loads commander, another operation its bundle", async (ctx) => {
    // Against the compose container the inspect below was seen to exit 2 without loading zod
    // (not understood yet); the local rig's passes run this case.
    skipUnless(ctx, needs.localHost("its inspect case was seen to take another path against the compose container"));
    const refusal = traced();
    const r = await runCli(["exec", "--workspace-id", "w", "--bogus", "x"], { env: refusal.env });
    expect(r.stderr).toBe("Unknown flag --bogus for operation exec\n");
    expect(refusal.loaded().package("commander")).toBe(true);

    const inspect = traced();
    expect((await runCli(["inspect", "--workspace-id", "w"], { stdin: "{}", env: inspect.env })).code).toBe(2);
    expect(inspect.loaded().opBundle()).toBe(true);
    expect(inspect.loaded().zod()).toBe(true);
    expect(inspect.loaded().schemaModules()).toEqual(["schema-base", "exec-schemas", "lifecycle-schemas", "schemas"]);

    const help = tracedBuiltins();
    expect((await runCli(["--help"], { env: help.env })).code).toBe(0);
    expect(help.loaded().builtin("net")).toBe(true);
  });

  describe("over the real sshd", () => {
    const ws = new ExecWorkspace("loading");
    beforeAll(() => ws.create());
    afterAll(() => ws.cleanup());

    it("exec and signal through the broker load neither commander nor ssh2", async (ctx) => {
      // Without an ssh binary an ssh_config file is read by the ssh-config package, which loads
      // node:child_process (for its own Match exec): only a machine with neither is like one with ssh.
      const configs = [SYSTEM_CONFIG, join(homedir(), ".ssh", "config")].filter((f) => existsSync(f));
      skipUnless(ctx, configs.length === 0 ? null : needs.command("ssh", `${configs.join(" and ")} would be parsed without it`));
      const t = traced();
      const done = await ws.run({ argv: ["/bin/true"] }, { env: t.env });
      expect(exitOf(done)).toEqual({ code: 0, signal: null });
      const exec = t.loaded();
      expect(exec.opBundle()).toBe(true);
      expect(exec.package("commander")).toBe(false);
      expect(exec.package("ssh2")).toBe(false);
      expect(exec.schemaModules()).toEqual(["schema-base", "exec-schemas"]);
      const execBuiltins = tracedBuiltins();
      expect(exitOf(await ws.run({ argv: ["/bin/true"] }, { env: execBuiltins.env }))).toEqual({ code: 0, signal: null });
      expect(execBuiltins.loaded().builtin("child_process")).toBe(false);
      expect(execBuiltins.loaded().builtin("crypto")).toBe(false);

      const sleeper = ws.start({ argv: ["/bin/sleep", "30"] });
      await sleeper.waitEvent("started");
      const s = traced();
      const sig = await runCli(["signal", "--workspace-id", ws.workspaceId, "--exec-id", sleeper.execId, "--signal", "SIGKILL"], {
        stdin: lifecycleRequest(ws.options),
        env: s.env,
        timeoutMs: 60_000,
      });
      expect(sig.stderr).toBe("");
      expect(sig.code).toBe(0);
      await sleeper.done;
      expect(s.loaded().package("commander")).toBe(false);
      expect(s.loaded().package("ssh2")).toBe(false);
      expect(s.loaded().schemaModules()).toEqual(["schema-base", "lifecycle-schemas"]);

      const sleeper2 = ws.start({ argv: ["/bin/sleep", "30"] });
      await sleeper2.waitEvent("started");
      const sb = tracedBuiltins();
      const sig2 = await runCli(["signal", "--workspace-id", ws.workspaceId, "--exec-id", sleeper2.execId, "--signal", "SIGKILL"], {
        stdin: lifecycleRequest(ws.options),
        env: sb.env,
        timeoutMs: 60_000,
      });
      expect(sig2.code).toBe(0);
      await sleeper2.done;
      expect(sb.loaded().builtin("child_process")).toBe(false);
      expect(sb.loaded().builtin("crypto")).toBe(false);
    });

    it("the ssh2 detector fires on an operation that connects in-process", async () => {
      const t = traced();
      const r = await runCli(["inspect", "--workspace-id", ws.workspaceId], {
        stdin: lifecycleRequest({ ...ws.options, broker: false }),
        env: t.env,
        timeoutMs: 60_000,
      });
      expect(r.code).toBe(0);
      expect(t.loaded().package("ssh2")).toBe(true);
      const b = tracedBuiltins();
      const again = await runCli(["inspect", "--workspace-id", ws.workspaceId], {
        stdin: lifecycleRequest({ ...ws.options, broker: false }),
        env: b.env,
        timeoutMs: 60_000,
      });
      expect(again.code).toBe(0);
      expect(b.loaded().builtin("child_process")).toBe(true);
      expect(b.loaded().builtin("crypto")).toBe(true);
    });
  });
});
