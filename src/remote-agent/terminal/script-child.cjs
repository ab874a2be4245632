// Fallback terminal owner for hosts without python3: util-linux `script` allocates the pty and
// copies bytes (its stdin -> terminal, terminal -> its stdout); `sh -c` execs this program as the
// terminal's session leader, so descriptors 3 (control), 4 (status) and 5 (the exec's tag) pass
// through `script` to here. Node can neither set a window size nor exec in place, so this process
// stays as the waiter: it sizes the terminal with `stty` before the workload starts, spawns the
// workload in its own foreground process group (exact argv0, env, cwd; the tag as fd 47 only in
// the workload) and reports the exact wait status, which `script -e` cannot (it folds a signal
// into 128+n). Same control/status lines as relay.py. Built-ins only; node >= 18.
"use strict";
const { spawn, spawnSync } = require("node:child_process");
const { closeSync, readFileSync, readdirSync } = require("node:fs");
const { Socket } = require("node:net");

const TAG_FD = 47;
const TAG_SRC = 5;
const HANGUP_GRACE_MS = 1000;
/**
 * A resize is acknowledged once the foreground group took its SIGWINCH, waiting at most this long,
 * and once it is back to waiting (it has run its handler), waiting at most SETTLE_WAIT_MS for that.
 */
const WINCH_WAIT_MS = 800;
const SETTLE_WAIT_MS = 100;
const WINCH_BIT = 1n << 27n;
const ERRNO_TEXT = { ENOENT: "No such file or directory", EACCES: "Permission denied", ENOTDIR: "Not a directory" };

// Terminal-generated signals reach the whole foreground group, this process included: they are
// meant for the workload. SIGHUP too: a lost controller is noticed on the control descriptor.
for (const sig of ["SIGINT", "SIGQUIT", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGHUP", "SIGTERM", "SIGUSR2", "SIGPIPE"]) {
  process.on(sig, () => undefined);
}

const status = new Socket({ fd: 4, readable: false, writable: true });
status.on("error", () => undefined);
const send = (msg) => status.write(JSON.stringify(msg) + "\n");

function stat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { state: f[0], pgid: Number(f[2]), sid: Number(f[3]), tpgid: Number(f[5]), startTime: f[19] };
  } catch {
    return null;
  }
}

function stty(path, rows, cols, extra) {
  const r = spawnSync(path, ["rows", String(rows), "cols", String(cols), ...extra], { stdio: [0, "ignore", "pipe"], timeout: 5000 });
  return r.status === 0;
}

/** Reads the size back from the terminal (node's own view is only refreshed on SIGWINCH). */
function sizeIs(path, rows, cols) {
  const r = spawnSync(path, ["size"], { stdio: [0, "pipe", "ignore"], encoding: "utf8", timeout: 5000 });
  return r.status === 0 && r.stdout.trim() === `${rows} ${cols}`;
}

/** Whether a process of the terminal's foreground group still has SIGWINCH pending (not blocked). */
function winchPending() {
  const self = stat(process.pid);
  if (!self) return false;
  // A stopped member (a paused workspace) takes the signal only when continued: not waited for.
  for (const pid of members((s) => s.pgid === self.tpgid && s.state !== "T" && s.state !== "t")) {
    let text;
    try {
      text = readFileSync(`/proc/${pid}/status`, "utf8");
    } catch {
      continue;
    }
    const mask = (key) => BigInt("0x" + ((new RegExp(`^${key}:\\s*([0-9a-f]+)`, "m").exec(text) || [])[1] || "0"));
    if ((mask("SigPnd") | mask("ShdPnd")) & WINCH_BIT && !(mask("SigBlk") & WINCH_BIT)) return true;
  }
  return false;
}

/** Whether a process of the terminal's foreground group is running or waiting for a CPU (state R). */
function foregroundRunning() {
  const self = stat(process.pid);
  return self !== null && members((s) => s.pgid === self.tpgid && s.state === "R").length > 0;
}

/**
 * A program that took the signal but has not run yet (a busy machine) may find input sent after
 * the answer in the same wake-up as its SIGWINCH and read first (node does: its event loop handles
 * signals after I/O), so the answer also waits until the group is back to waiting.
 */
async function winchDelivered() {
  const deadline = Date.now() + WINCH_WAIT_MS;
  while (winchPending() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
  const settle = Math.min(deadline, Date.now() + SETTLE_WAIT_MS);
  while (foregroundRunning() && Date.now() < settle) await new Promise((r) => setTimeout(r, 2));
}

/** Live processes matching `pred` on their stat, never this one. */
function members(pred) {
  const out = [];
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const st = stat(pid);
    if (st && st.state !== "Z" && pred(st)) out.push(pid);
  }
  return out;
}

function kill(pid, sig) {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
}

/** To the workload's current process group; this process shares it at first and is left out. */
function signalGroup(pid, sig) {
  const st = stat(pid);
  if (!st) return;
  if (st.pgid !== process.pid) kill(-st.pgid, sig);
  else for (const p of members((s) => s.pgid === st.pgid)) kill(p, sig);
}

if (process.argv[2] === "--probe") {
  // Checks what the driver relies on: descriptors 3-4 passed through, stty sizing this terminal.
  const ok = process.stdout.isTTY === true && stty(process.argv[3], 7, 9, []) && sizeIs(process.argv[3], 7, 9);
  status.end(JSON.stringify({ type: "probe", ok }) + "\n", () => process.exit(0));
} else {
  main();
}

function main() {
  const control = new Socket({ fd: 3, readable: true, writable: false });
  let buf = "";
  let child = null;
  let sttyPath = "stty";
  let exit = null; // {code, signal} once the workload is reaped
  let hungUp = false;
  let resizing = Promise.resolve();
  const exited = () => exit !== null;

  const hangup = async () => {
    if (hungUp) return;
    hungUp = true;
    if (child && !exited()) {
      signalGroup(child.pid, "SIGHUP");
      signalGroup(child.pid, "SIGCONT");
      const deadline = Date.now() + HANGUP_GRACE_MS;
      while (!exited() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    }
    // Everything left in this terminal's session is killed (this process leads it).
    for (let i = 0; i < 200; i++) {
      const left = members((s) => s.sid === process.pid);
      if (left.length === 0) break;
      for (const p of left) kill(p, "SIGKILL");
      await new Promise((r) => setTimeout(r, 10));
    }
    for (let i = 0; i < 200 && child && !exited(); i++) await new Promise((r) => setTimeout(r, 10));
    if (exit) status.end(JSON.stringify({ type: "exit", ...exit }) + "\n", () => process.exit(0));
    else process.exit(0);
  };

  const onMessage = (msg) => {
    if (msg.type === "launch" && !child) launch(msg);
    else if (msg.type === "resize" && child) {
      const { id, rows, cols } = msg;
      // In order, each answered only once the workload took its SIGWINCH: input sent after the
      // answer must not reach a program that has not yet seen the new size.
      resizing = resizing.then(async () => {
        const ok = !exited() && stty(sttyPath, rows, cols, []) && sizeIs(sttyPath, rows, cols);
        if (ok) await winchDelivered();
        send({ type: "resized", id, ok });
      });
    } else if (msg.type === "signal" && child && !exited() && typeof msg.signal === "string") {
      signalGroup(child.pid, msg.signal);
    }
  };

  const launch = (msg) => {
    sttyPath = msg.stty;
    if (!stty(msg.stty, msg.rows, msg.cols, ["iutf8"]) || !sizeIs(msg.stty, msg.rows, msg.cols)) {
      send({ type: "error", message: "stty could not size the terminal" });
      status.end(() => process.exit(1));
      return;
    }
    const stdio = ["inherit", "inherit", "inherit"];
    if (msg.tag) {
      while (stdio.length < TAG_FD) stdio.push("ignore");
      stdio.push(TAG_SRC);
    }
    let c;
    try {
      c = spawn(msg.file, msg.args, { argv0: msg.argv0, cwd: msg.cwd, env: msg.env, stdio });
    } catch (err) {
      c = null;
      failed(msg, err);
    }
    if (msg.tag) closeSync(TAG_SRC); // the workload has it as fd 47; this process must not
    if (!c) return;
    child = c;
    c.once("error", (err) => {
      if (c.pid === undefined) failed(msg, err);
    });
    if (c.pid !== undefined) {
      const st = stat(c.pid);
      send({
        type: "spawned",
        pid: c.pid,
        pgid: st ? st.pgid : process.pid,
        sid: st ? st.sid : process.pid,
        startTime: st ? st.startTime : "",
      });
    }
    c.once("exit", (code, signal) => {
      exit = { code, signal };
      if (hungUp) return; // reported once the hang-up is done
      status.end(JSON.stringify({ type: "exit", ...exit }) + "\n", () => process.exit(0));
    });
  };

  const failed = (msg, err) => {
    const code = err.code === "ENOENT" ? 127 : 126;
    const text = ERRNO_TEXT[err.code] || err.message;
    process.stderr.write(`paseo-ssh-runtime: ${msg.argv0}: ${text}\n`);
    exit = { code, signal: null };
    send({ type: "spawn-failed", code, message: text });
    status.end(JSON.stringify({ type: "exit", ...exit }) + "\n", () => process.exit(0));
  };

  control.setEncoding("utf8");
  control.on("data", (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let msg = null;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if (msg && typeof msg === "object") onMessage(msg);
    }
  });
  control.on("end", () => void hangup());
  control.on("error", () => void hangup());
}
