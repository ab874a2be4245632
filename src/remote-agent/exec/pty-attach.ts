// PTY entry point: `node agent.cjs pty-attach <token>`, started by sshd on a channel with a
// server-side pty (the session's controlling terminal). It writes the ready marker, connects to
// the control agent's socket for <token>, and spawns the workload on the terminal:
//   * NOT detached: the workload stays in the terminal's foreground process group, so it gets
//     SIGWINCH on resize and an interactive shell can take job control;
//   * exactly the envelope env (no TERM added; sshd's session env is never passed on);
//   * the exec's tag on TAG_FD so its whole tree stays findable.
// It never reads the terminal itself, ignores terminal-generated signals (they are meant for the
// workload), confirms window sizes (and that the workload took their SIGWINCH) for resize
// acknowledgements and reports the real exit status.
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { connect } from "node:net";
import { dirname, join } from "node:path";
import { AGENT_READY_MARKER } from "../../shared/frames.js";
import { closeTag, openTag, taggedStdio } from "./launch.js";
import { isControlLine, onLines, sendLine } from "./attach-lines.js";
import { listPids, readProcStat, signalPending, terminalForegroundGroup, type ProcStat } from "../../shared/proc-stat.js";
import { killMembers, membersByTag } from "../proc/process-set.js";

/** How long a resize may take to show on the terminal before it is reported as not applied. */
const SIZE_CONFIRM_MS = 800;
/** After the workload took its SIGWINCH: how long it may take to be back to waiting. */
const SETTLE_MS = 100;
const WINCH = constants.signals.SIGWINCH;

declare const __filename: string;

function windowSizeIs(rows: number, cols: number): boolean {
  try {
    if (!process.stdout.isTTY) return false;
    const [c, r] = process.stdout.getWindowSize();
    return c === cols && r === rows;
  } catch {
    return false;
  }
}

/** Processes of the terminal's foreground group other than this one. */
function foregroundOthers(): ProcStat[] {
  const group = terminalForegroundGroup(process.pid);
  if (group === null) return [];
  return listPids().flatMap((pid) => {
    const st = pid === process.pid ? null : readProcStat(pid);
    return st?.pgid === group ? [st] : [];
  });
}

/**
 * True once the terminal shows the size and the foreground group took the SIGWINCH that came with
 * it (the kernel queues the signal before the new size becomes readable) and is back to waiting:
 * a program that took the signal but has not run yet (a busy machine) may otherwise find input
 * sent after the answer in the same wake-up and read first (node does: its event loop handles
 * signals after I/O). A program that never takes the signal only delays the answer to the
 * deadline, one that keeps running by SETTLE_MS at most; the size itself is what decides.
 */
function confirmSize(rows: number, cols: number): Promise<boolean> {
  const deadline = Date.now() + SIZE_CONFIRM_MS;
  return new Promise((resolve) => {
    let settleBy = 0; // once the signal was taken
    const check = () => {
      const now = Date.now();
      // A stopped process (a paused workspace) takes the signal only when continued: not waited for.
      const waiting = (st: ProcStat) => st.state !== "T" && st.state !== "t" && signalPending(st.pid, WINCH);
      if (!settleBy && windowSizeIs(rows, cols) && !foregroundOthers().some(waiting)) {
        settleBy = Math.min(deadline, now + SETTLE_MS);
      }
      if (settleBy && (now >= settleBy || !foregroundOthers().some((st) => st.state === "R"))) return resolve(true);
      if (now >= deadline) return resolve(windowSizeIs(rows, cols));
      setTimeout(check, 2);
    };
    check();
  });
}

export function ptyAttachMain(token: string): void {
  process.stdout.write(AGENT_READY_MARKER);
  if (!/^[0-9a-f]{32}$/.test(token)) {
    process.stderr.write("pty-attach: invalid token\n");
    process.exit(2);
  }
  // Terminal-generated signals target the foreground group, which includes us: they are the workload's.
  for (const sig of ["SIGINT", "SIGQUIT", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGHUP"] as const) process.on(sig, () => undefined);
  // <root>/agent/<hash>/agent.cjs → <root>
  const root = dirname(dirname(dirname(__filename)));
  // Relative to `run/`, as the control agent bound it (short socket paths whatever the root).
  try {
    process.chdir(join(root, "run"));
  } catch (err) {
    process.stderr.write(`pty-attach: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const sock = connect(`${token}.sock`);
  let child: ReturnType<typeof spawn> | null = null;
  let tagPath: string | null = null;

  const reapAndExit = async (code: number) => {
    if (tagPath) {
      const path = tagPath;
      // The tag is `<dir>/execs/<hash>.tag`; the control agent is gone, so reap the tree ourselves.
      await killMembers(() => membersByTag(dirname(dirname(path)), path), "pty exec").catch((err: Error) => {
        process.stderr.write(`pty-attach: ${err.message}\n`);
      });
    }
    process.exit(code);
  };

  sock.on("error", () => void reapAndExit(1));
  sock.on("close", () => {
    if (child && child.exitCode === null && child.signalCode === null) void reapAndExit(1);
    else process.exit(0);
  });
  onLines(sock, isControlLine, (msg) => {
    if (msg.type === "launch" && !child) {
      tagPath = msg.tagPath;
      const tagFd = openTag(tagPath);
      try {
        child = spawn(msg.file, msg.args, {
          argv0: msg.argv0,
          cwd: msg.cwd,
          env: msg.env,
          stdio: taggedStdio(["inherit", "inherit", "inherit"], tagFd),
        });
      } finally {
        closeTag(tagFd);
      }
      const c = child;
      const st = c.pid !== undefined ? readProcStat(c.pid) : null;
      c.once("error", (err: NodeJS.ErrnoException) => {
        if (c.pid === undefined) {
          sendLine(sock, {
            type: "spawn-failed",
            code: err.code === "ENOENT" ? 127 : 126,
            message: `paseo-ssh-runtime: ${msg.argv0}: ${err.message}\r\n`,
          });
        }
      });
      if (c.pid !== undefined) {
        sendLine(sock, { type: "spawned", pid: c.pid, pgid: st?.pgid ?? c.pid, sid: st?.sid ?? c.pid, startTime: st?.startTime ?? "" });
      }
      c.once("exit", (code, signal) => {
        sendLine(sock, { type: "exit", code, signal });
        // The control agent closes the socket once it has recorded the exit; then we exit too.
        setTimeout(() => process.exit(0), 5000).unref();
      });
    } else if (msg.type === "check-size") {
      const id = msg.id;
      void confirmSize(msg.rows, msg.cols).then((ok) => sendLine(sock, { type: "resized", id, ok }));
    }
  });
}
