// Runs the built runtime (`node dist/cli.js …`) the way Paseo does: a fresh process per operation,
// the lifecycle request on stdin; exec with five pipes (fd3 spawn envelope, fd4 process events),
// detached. Times what Paseo would see: fd4 `started`, the first workload byte on fd1, fd4 `exit`.
// Every child is registered so an interrupted bench can end them all.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";

export const RUNTIME_INSTANCE_ID = "be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be0c4be00";
const OP_TIMEOUT_MS = 180_000;
const EXEC_TIMEOUT_MS = 60_000;

/** Children still running, for the bench's interrupt handler. */
export const liveChildren = new Set();
let stopping = false;

/** From now on nothing new is started (the bench is cleaning up); the measuring code fails fast. */
export function stopSpawning() {
  stopping = true;
}

export function killChild(child) {
  try {
    if (child.pid) process.kill(-child.pid, "SIGKILL");
  } catch {
    try {
      child.kill("SIGKILL");
    } catch {
      // gone
    }
  }
}

function track(child) {
  if (stopping) {
    killChild(child);
    throw new Error("the bench is stopping");
  }
  liveChildren.add(child);
  child.on("close", () => liveChildren.delete(child));
  return child;
}

export const lastLine = (s) =>
  String(s)
    .trim()
    .split("\n")
    .filter((l) => l && !l.startsWith("{"))
    .slice(-1)[0]
    ?.slice(0, 200) ?? "no output";

/** Runs any command to completion: { code, signal, stdout, stderr, ms }. Detached: its group dies on timeout. */
export function runCommand(cmd, args, { input, env, cwd, timeoutMs = OP_TIMEOUT_MS, onSpawn } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = track(spawn(cmd, args, { cwd, env: env ?? process.env, stdio: ["pipe", "pipe", "pipe"], detached: true }));
    onSpawn?.(child);
    const out = [];
    const err = [];
    child.stdout.on("data", (d) => out.push(d));
    child.stderr.on("data", (d) => err.push(d));
    child.stdin.on("error", () => undefined);
    child.stdin.end(input ?? "");
    const timer = setTimeout(() => killChild(child), timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({
        code,
        signal,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
        ms: performance.now() - t0,
        pid: child.pid,
        spawnEpoch: performance.timeOrigin + t0,
      });
    });
  });
}

/**
 * One runtime installation under test: `cli` is dist/cli.js; `env` is the environment every
 * runtime process gets (the bench's marker and a private TMPDIR for brokers included).
 */
export function runtime({ root, tmp }) {
  const cli = join(root, "dist", "cli.js");
  const env = { ...process.env, TMPDIR: tmp };
  // Brokers prefer XDG_RUNTIME_DIR; without it their sockets live under the private TMPDIR.
  delete env.XDG_RUNTIME_DIR;
  delete env.PASEO_SSH_NO_BROKER;
  const withEnv = (extra) => ({ ...env, ...extra });

  const lifecycleRequest = (options, extra = {}) =>
    `${JSON.stringify({ protocolVersion: 1, runtimeInstanceId: RUNTIME_INSTANCE_ID, ...extra, options })}\n`;

  /** A lifecycle op; rejects on a non-zero exit with the runtime's last stderr line. */
  async function op(name, { workspaceId, options, extra, flags = [], extraEnv, onSpawn, timeoutMs } = {}) {
    const args = [cli, name, ...(workspaceId ? ["--workspace-id", workspaceId] : []), ...flags];
    const input = options ? lifecycleRequest(options, extra) : "";
    const r = await runCommand(process.execPath, args, { input, env: withEnv(extraEnv), onSpawn, timeoutMs });
    if (r.code !== 0) throw new Error(`${name} failed (${r.signal ?? r.code}): ${lastLine(r.stderr)}`);
    return r;
  }

  function envelope(options, argv, execId, stdio, purpose) {
    return `${JSON.stringify({
      type: "spawn",
      protocolVersion: 1,
      runtimeInstanceId: RUNTIME_INSTANCE_ID,
      argv,
      env: purpose === "workspace-helper" ? {} : { PATH: "/usr/local/bin:/usr/bin:/bin" },
      purpose: { kind: purpose },
      options,
      execId,
      stdio,
    })}\n`;
  }

  /**
   * Starts an exec and returns a handle: `started` (ms after spawn), `done` (ms after spawn of fd4
   * `started`, first fd1 byte, fd4 `exit` and process close; the `exit` event itself),
   * `endInput()` (closes fd0: a `cat` workload then exits), `kill()`. `timeoutMs`: how long it may
   * live before it is killed as hung (long-lived workloads raise it).
   */
  function startExec(
    options,
    workspaceId,
    argv,
    { pty = false, purpose = "workspace-script", extraEnv, keepStdin = false, timeoutMs = EXEC_TIMEOUT_MS } = {},
  ) {
    const execId = randomBytes(16).toString("hex");
    const t0 = performance.now();
    const spawnEpoch = performance.timeOrigin + t0;
    const child = track(
      spawn(process.execPath, [cli, "exec", "--workspace-id", workspaceId], {
        stdio: ["pipe", "pipe", "pipe", "pipe", "pipe"],
        detached: true,
        env: withEnv(extraEnv),
      }),
    );
    const [stdin, stdout, stderr, control, events] = child.stdio;
    const times = { started: null, firstOutput: null, exited: null };
    const seen = [];
    let out = "";
    let err = "";
    let fd4 = "";
    let exit = null;
    let failure = null;
    let onStarted;
    const started = new Promise((resolve) => (onStarted = resolve));
    stdout.on("data", (d) => {
      times.firstOutput ??= performance.now() - t0;
      out += d;
    });
    stderr.on("data", (d) => (err += d));
    stdin.on("error", () => undefined);
    control.on("error", () => undefined);
    control.write(envelope(options, argv, execId, pty ? { kind: "pty", rows: 24, cols: 80 } : { kind: "pipes" }, purpose));
    if (!pty) control.end();
    if (!pty && !keepStdin) stdin.end();
    events.on("data", (d) => {
      fd4 += d;
      const lines = fd4.split("\n");
      fd4 = lines.pop();
      for (const line of lines) {
        let ev;
        try {
          ev = JSON.parse(line);
        } catch {
          failure ??= `fd4 carried a line that is not JSON: ${line.slice(0, 80)}`;
          continue;
        }
        seen.push(ev.type);
        if (ev.type === "started") {
          times.started = performance.now() - t0;
          onStarted(times.started);
        } else if (ev.type === "exit") {
          times.exited = performance.now() - t0;
          exit = ev;
          stdin.end();
          control.end();
        } else if (ev.type === "error") failure ??= ev.message;
      }
    });
    const timer = setTimeout(() => {
      failure ??= `no fd4 exit within ${timeoutMs} ms`;
      killChild(child);
    }, timeoutMs);
    const done = new Promise((resolve, reject) => {
      child.on("error", (e) => reject(e));
      child.on("close", (code) => {
        clearTimeout(timer);
        onStarted(null);
        if (failure || !exit)
          return reject(new Error(`exec ${argv[0]}: ${failure ?? `no fd4 exit (wrapper exit ${code})`}; ${lastLine(err)}`));
        if (!/^started(,resized)*,eof,exit$/.test(seen.join(",")))
          return reject(new Error(`exec ${argv[0]}: fd4 sequence ${seen.join(",")}`));
        resolve({ ...times, close: performance.now() - t0, spawnEpoch, exit, stdout: out, stderr: err, pid: child.pid });
      });
    });
    done.catch(() => undefined);
    return { execId, child, started, done, endInput: () => stdin.end(), kill: () => killChild(child) };
  }

  /** Runs an exec to its end and resolves with its timings; non-zero workload exit is a failure. */
  async function exec(options, workspaceId, argv, opts = {}) {
    const r = await startExec(options, workspaceId, argv, opts).done;
    if (r.exit.code !== 0) throw new Error(`exec ${argv.join(" ")} exited ${r.exit.code ?? r.exit.signal}: ${lastLine(r.stderr)}`);
    return r;
  }

  return { cli, env, withEnv, lifecycleRequest, op, startExec, exec };
}
