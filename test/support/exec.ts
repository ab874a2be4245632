// Drives the built `exec` wrapper as Paseo starts it (the driver's startExec: five pipes, detached)
// and the `signal`/`processes`/lifecycle operations, against a workspace created on the real sshd
// rig by our own `create`. Unlike the driver's execWorkload it writes fd3 raw and keeps fd4 raw,
// so tests can send what Paseo never would and see exactly what came back; the contract decoder
// then checks fd4 so ordering bugs fail loudly.
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable, Writable } from "node:stream";
import { expect } from "vitest";
import { ControlFrameSchema, ProcessEventSchema, decodeFrames, encodeCanonical, type Options } from "../../src/contract/index.js";
import { TEST_RUNTIME_INSTANCE_ID, cliCommand, lifecycleRequest, runCli, type CliResult } from "./run-cli.js";
import { startExec } from "../../src/demo/runtime-driver.js";
import { rigOptions } from "../rig/rig.js";
import { seedRepo } from "../fixtures/repo.js";
import { dirInput, suiteRoot } from "./workspace.js";
import { setExecHooks } from "./test-hooks.js";
import { requireView } from "./host-view.js";

export type ProcessEvent = ReturnType<typeof decodeFrames<typeof ProcessEventSchema>>[number];
export type Stdio = { kind: "pipes" } | { kind: "pty"; rows: number; cols: number; term?: string };

export interface ExecSpec {
  argv: string[];
  env?: Record<string, string>;
  cwd?: string;
  stdio?: Stdio;
  execId?: string;
  purpose?: string;
}

export interface ExecResult {
  code: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: string;
  fd4: string;
  events: ProcessEvent[];
  /** Decoder failure text, if fd4 did not decode. */
  fd4Error: string | null;
  ms: number;
}

export interface ExecHandle {
  child: ChildProcess;
  execId: string;
  stdin: Writable;
  control: Writable;
  /** Resolves once fd1 output contains `text`. */
  waitOutput(text: string, ms?: number): Promise<void>;
  /** Resolves when fd4 has carried `count` (default 1) events of this type. */
  waitEvent(type: string, ms?: number, count?: number): Promise<void>;
  sendControl(frame: Record<string, unknown>): void;
  output(): Buffer;
  /** With `pauseStdout`: starts reading fd1 (a slow Paseo reader until then). */
  resumeStdout(): void;
  stderrText(): string;
  done: Promise<ExecResult>;
}

export const newExecId = () => randomBytes(16).toString("hex");

export class ExecWorkspace {
  readonly options: Options;
  readonly configuredRoot: string;
  readonly workspaceId = `exec-${randomBytes(4).toString("hex")}`;
  /** Canonical remote workload root (placement cwd). */
  root = "";
  /**
   * Test hook for PTY execs: where the agent looks for the programs that let it own a terminal
   * ("" = nowhere: sshd's pty is used). Unset: the host's own.
   */
  terminalSearchPath: string | undefined;
  private base = "";
  /** The Paseo side repository the workspace was created from (set by create()). */
  localRepo = "";

  /** `extra` overrides runtime options (e.g. another login `user`). */
  constructor(label = "exec", extra: Record<string, unknown> = {}) {
    this.configuredRoot = suiteRoot(label, typeof extra.user === "string" ? extra.user : undefined);
    this.options = rigOptions({ root: this.configuredRoot, ...extra }) as Options;
  }

  /** `prepare`: what the Paseo side repository gets before the create reads it (remotes, config). */
  async create(prepare?: (repo: string) => void): Promise<void> {
    this.base = mkdtempSync(join(tmpdir(), "paseo-exec-fixture-"));
    const repo = seedRepo(this.base);
    this.localRepo = repo.path;
    prepare?.(repo.path);
    const r = await this.lifecycle("create", { input: dirInput(this.workspaceId, repo.path) });
    if (r.code !== 0) throw new Error(`create failed: ${r.stderr}`);
    const state = JSON.parse(r.stdout.toString("utf8")) as { placement: { cwd: string } };
    this.root = state.placement.cwd;
  }

  lifecycle(op: string, extra: Record<string, unknown> = {}, flags: string[] = []): Promise<CliResult> {
    const args = op === "reconcile" ? [op] : [op, "--workspace-id", this.workspaceId, ...flags];
    return runCli(args, { stdin: lifecycleRequest(this.options, extra), timeoutMs: 60_000 });
  }

  signal(execId: string, signal: string): Promise<CliResult> {
    return this.lifecycle("signal", {}, ["--exec-id", execId, "--signal", signal]);
  }

  async processes(): Promise<Array<{ pid: number; state: string; command: string }>> {
    const r = await this.lifecycle("processes");
    if (r.code !== 0) throw new Error(`processes failed: ${r.stderr}`);
    return (JSON.parse(r.stdout.toString("utf8")) as { processes: Array<{ pid: number; state: string; command: string }> }).processes;
  }

  envelope(spec: ExecSpec, execId: string): string {
    return encodeCanonical(ControlFrameSchema, {
      type: "spawn",
      protocolVersion: 1,
      runtimeInstanceId: TEST_RUNTIME_INSTANCE_ID,
      argv: spec.argv,
      ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
      env: spec.env ?? {},
      purpose: { kind: (spec.purpose ?? "terminal") as "terminal" },
      options: this.options,
      execId,
      stdio: spec.stdio ?? { kind: "pipes" },
    });
  }

  /** Starts the wrapper; pipes mode closes fd3 after the envelope as Paseo does. */
  start(
    spec: ExecSpec,
    opts: {
      stdin?: Buffer | string;
      keepStdinOpen?: boolean;
      /** Pipes mode: leave fd3 open after the envelope (PTY mode always does). */
      keepControlOpen?: boolean;
      env?: NodeJS.ProcessEnv;
      rawEnvelope?: string;
      pauseStdout?: boolean;
      /** Test hook: the agent delays publishing this exec's identity by this many ms. */
      delayIdentityMs?: number;
    } = {},
  ): ExecHandle {
    const execId = spec.execId ?? newExecId();
    const hooks = {
      ...(opts.delayIdentityMs !== undefined ? { delayIdentityMs: opts.delayIdentityMs } : {}),
      ...(spec.stdio?.kind === "pty" && this.terminalSearchPath !== undefined ? { terminalSearchPath: this.terminalSearchPath } : {}),
    };
    if (Object.keys(hooks).length > 0) setExecHooks(this.configuredRoot, execId, hooks);
    const t0 = performance.now();
    const child = startExec(cliCommand(opts.env), this.workspaceId);
    const [stdin, stdout, stderr, control, events] = child.stdio as [Writable, Readable, Readable, Writable, Readable];
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const fd4: Buffer[] = [];
    const waiters: Array<() => void> = [];
    const poke = () => waiters.splice(0).forEach((w) => w());
    stdout.on("data", (d: Buffer) => (out.push(d), poke()));
    if (opts.pauseStdout) stdout.pause();
    stderr.on("data", (d: Buffer) => err.push(d));
    events.on("data", (d: Buffer) => (fd4.push(d), poke()));
    stdin.on("error", () => undefined);
    control.on("error", () => undefined);
    control.write(opts.rawEnvelope ?? this.envelope(spec, execId));
    const pty = spec.stdio?.kind === "pty";
    if (!pty && !opts.keepControlOpen) control.end();
    if (opts.stdin !== undefined) stdin.write(opts.stdin);
    if (!opts.keepStdinOpen && !pty) stdin.end();
    const fd4Text = () => Buffer.concat(fd4).toString("utf8");
    const waitFor = (ok: () => boolean, what: string, ms: number) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `timed out waiting for ${what}; stdout=${JSON.stringify(Buffer.concat(out).toString())} fd4=${fd4Text()} stderr=${Buffer.concat(err).toString()}`,
              ),
            ),
          ms,
        );
        const check = () => {
          if (ok()) {
            clearTimeout(timer);
            resolve();
          } else waiters.push(check);
        };
        check();
      });
    const done = new Promise<ExecResult>((resolve) => {
      child.on("close", (code, signal) => {
        const text = fd4Text();
        let events: ProcessEvent[] = [];
        let fd4Error: string | null = null;
        try {
          events = decodeFrames(text, ProcessEventSchema);
        } catch (e) {
          fd4Error = (e as Error).message;
        }
        resolve({
          code,
          signal,
          stdout: Buffer.concat(out),
          stderr: Buffer.concat(err).toString("utf8"),
          fd4: text,
          events,
          fd4Error,
          ms: performance.now() - t0,
        });
      });
    });
    return {
      child,
      execId,
      stdin,
      control,
      waitOutput: (text, ms = 30_000) =>
        waitFor(() => Buffer.concat(out).toString("utf8").includes(text), `output ${JSON.stringify(text)}`, ms),
      waitEvent: (type, ms = 30_000, count = 1) =>
        waitFor(() => fd4Text().split(`"type":"${type}"`).length > count, `${count} event(s) ${type}`, ms),
      sendControl: (frame) => control.write(`${JSON.stringify(frame)}\n`),
      output: () => Buffer.concat(out),
      resumeStdout: () => void stdout.resume(),
      stderrText: () => Buffer.concat(err).toString("utf8"),
      done,
    };
  }

  async run(spec: ExecSpec, opts: Parameters<ExecWorkspace["start"]>[1] = {}): Promise<ExecResult> {
    return this.start(spec, opts).done;
  }

  /** `destroy: false`: the caller destroyed it already (a destroy here would start a broker and daemon anew). */
  async cleanup({ destroy = true }: { destroy?: boolean } = {}): Promise<void> {
    if (destroy) await this.lifecycle("destroy").catch(() => undefined);
    if (this.base) rmSync(this.base, { recursive: true, force: true });
    // The host daemon may still be writing its last lines there (a reconnect after a reset): retried.
    rmSync(requireView().path(this.configuredRoot), { recursive: true, force: true, maxRetries: 50, retryDelay: 100 });
  }
}

/** Runs `pwd -P` with each `[cwd, expected]`: it must run, in exactly the real directory expected. */
export async function expectRunsIn(ws: ExecWorkspace, cases: Array<[string, string]>): Promise<void> {
  for (const [cwd, expected] of cases) {
    const r = await ws.run({ argv: ["/bin/pwd", "-P"], cwd });
    expect({ cwd, exit: exitOf(r), stdout: r.stdout.toString(), stderr: r.stderr }).toEqual({
      cwd,
      exit: { code: 0, signal: null },
      stdout: `${expected}\n`,
      stderr: "",
    });
  }
}

/** The `exit` event of a result, or a failure naming what fd4 carried instead. */
export function exitOf(r: ExecResult): { code: number | null; signal: string | null } {
  const types = r.events.map((e) => e.type).join(",");
  if (r.fd4Error || !/^started(,resized)*,eof,exit$/.test(types)) {
    throw new Error(`fd4 was not started,[resized…,]eof,exit: ${types} ${r.fd4Error ?? ""} fd4=${r.fd4} stderr=${r.stderr}`);
  }
  const e = r.events[r.events.length - 1] as { code: number | null; signal: string | null };
  return { code: e.code, signal: e.signal };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resident set size of a live process in bytes (0 once it is gone). */
export function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * Writes `total` bytes of `chunk` repeated into `stream` as fast as it takes them (honouring its
 * backpressure), sampling `pid`'s RSS meanwhile. Stops early when the stream closes or fails, or
 * when it took nothing for `stallMs` (the reader stopped reading). Returns bytes written and the
 * largest RSS seen.
 */
export async function flood(
  stream: Writable,
  pid: number,
  total: number,
  chunk: Buffer,
  stallMs = 3000,
): Promise<{ written: number; maxRss: number }> {
  let maxRss = rssOf(pid);
  const sampler = setInterval(() => (maxRss = Math.max(maxRss, rssOf(pid))), 20);
  let written = 0;
  let ended = false;
  const onEnd = () => (ended = true);
  stream.once("close", onEnd);
  stream.once("error", onEnd);
  try {
    while (written < total && !ended) {
      if (stream.write(chunk)) {
        written += chunk.length;
        continue;
      }
      written += chunk.length;
      const drained = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), stallMs);
        const done = (ok: boolean) => () => {
          clearTimeout(timer);
          stream.off("drain", onDrain);
          stream.off("close", onClose);
          resolve(ok);
        };
        const onDrain = done(true);
        const onClose = done(false);
        stream.once("drain", onDrain);
        stream.once("close", onClose);
      });
      if (!drained) break;
    }
  } finally {
    clearInterval(sampler);
    maxRss = Math.max(maxRss, rssOf(pid));
    stream.off("close", onEnd);
    stream.off("error", onEnd);
  }
  return { written, maxRss };
}

/** Polls until `check` holds or `ms` elapse; returns the last value of `check`. */
export async function eventually<T>(check: () => Promise<T> | T, ok: (v: T) => boolean, ms = 5000, every = 50): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (ok(v) || Date.now() >= deadline) return v;
    await sleep(every);
  }
}

/**
 * Where a secret shows up on this machine or the host: any process argv, any process environment
 * except `allowed` pids (the workload's own), any file under the host's `root`.
 */
export function secretLeaks(secret: string, root: string, allowed: Set<number>): { argv: string[]; environ: string[]; files: string[] } {
  const found = { argv: [] as string[], environ: [] as string[], files: [] as string[] };
  // Every process of this machine: the local side's and the host's (the compose container's too,
  // by this machine's pids); `allowed` names host pids.
  const view = requireView();
  const allowedHere = new Set([...allowed].map((pid) => view.localPid(pid)));
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`);
      if (cmdline.includes(secret)) found.argv.push(`${name}: ${cmdline.toString().replace(/\0/g, " ")}`);
      if (!allowedHere.has(Number(name)) && readFileSync(`/proc/${name}/environ`).includes(secret)) {
        found.environ.push(`${name}: ${cmdline.toString().replace(/\0/g, " ")}`);
      }
    } catch {
      // the process ended during the scan
    }
  }
  const walk = (dir: string) => {
    // Scanned while git and the daemon write (lock files, temporary objects): what vanished meanwhile held nothing.
    const gone = (err: unknown) => {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    };
    let entries: string[] = [];
    try {
      entries = readdirSync(dir);
    } catch (err) {
      gone(err);
    }
    for (const entry of entries) {
      const p = join(dir, entry);
      const st = lstatSync(p, { throwIfNoEntry: false });
      if (st?.isDirectory()) walk(p);
      else if (st?.isFile() && st.size < 50_000_000) {
        try {
          if (readFileSync(p).includes(secret)) found.files.push(p);
        } catch (err) {
          gone(err);
        }
      }
    }
  };
  walk(view.path(root));
  return found;
}
