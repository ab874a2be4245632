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
import { listPids, readProcStat, signalPending, terminalForegroundGroup } from "../../shared/proc-stat.js";
import { killMembers, membersByTag } from "../proc/process-set.js";

/** How long a resize may take to show on the terminal before it is reported as not applied. */
const SIZE_CONFIRM_MS = 800;
const WINCH = constants.signals.SIGWINCH;

declare const __filename: string;

function windowSize(): [number, number] | null {
  try {
    return process.stdout.isTTY ? process.stdout.getWindowSize() : null;
  } catch {
    return null;
  }
}

/** Whether a process of the terminal's foreground group (not this one) has yet to take its SIGWINCH. */
function winchPending(): boolean {
  const group = terminalForegroundGroup(process.pid);
  if (group === null) return false;
  return listPids().some((pid) => pid !== process.pid && readProcStat(pid)?.pgid === group && signalPending(pid, WINCH));
}

/**
 * True once the terminal shows the size and the foreground group took the SIGWINCH that came with
 * it (the kernel queues the signal before the new size becomes readable): input sent after the
 * answer then never reaches a program that has not been told. A program that never takes the
 * signal only delays the answer to the deadline; the size itself is what decides.
 */
function confirmSize(rows: number, cols: number): Promise<boolean> {
  const deadline = Date.now() + SIZE_CONFIRM_MS;
  return new Promise((resolve) => {
    let shown = false;
    const check = () => {
      const size = windowSize();
      shown ||= size !== null && size[0] === cols && size[1] === rows;
      if (shown && !winchPending()) return resolve(true);
      if (Date.now() >= deadline) return resolve(shown);
      setTimeout(check, shown ? 2 : 5);
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
      void confirmSize(msg.rows, msg.cols).then((ok) => sendLine(sock, { type: "size", id, ok }));
    }
  });
}
