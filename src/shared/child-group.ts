// A child that leads its own process group, with an end that always comes. Killing only the child
// leaves what it started running: git's `git-lfs filter-process`, the other commands of a
// `sh -c "a | b"` pipeline. Those keep the child's stdout/stderr open, so `close` never arrives
// and whoever waits for it hangs (issue 30: a create stuck 400 s+ behind an orphaned LFS filter,
// a `yes | cat` hostsCommand spinning a CPU forever). So a kill goes to the whole group, and the
// wait for the pipes to close is bounded once the child has exited or been killed.
// Built-ins only: the remote agent bundles it (git-exec.ts). node:child_process is loaded on the
// first spawn, not with the module: the exec and signal operations import git-exec's schemas
// (through agent-api) but never run git, and loading it is part of every such process's start.
import type { ChildProcessByStdio } from "node:child_process";
import type { Readable, Writable } from "node:stream";

/** How long the pipes may stay open after the child exited or was killed. */
export const CLOSE_GRACE_MS = 2_000;

export interface GroupEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The timeout killed the group. */
  timedOut: boolean;
}

export interface GroupChild {
  child: ChildProcessByStdio<Writable | null, Readable, Readable>;
  /** SIGKILL to the child's whole group; harmless once it is gone. */
  kill(): void;
  /**
   * The child's end: once it exited and its pipes closed, or CLOSE_GRACE_MS after it exited or was
   * killed, whichever is first (what still holds the pipes is killed then). Rejects if it could
   * not be started.
   */
  ended: Promise<GroupEnd>;
}

export interface GroupOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** "ignore": the child reads /dev/null. */
  stdin: "pipe" | "ignore";
  /** Kills the group after this long (ended reports timedOut). */
  timeoutMs: number;
}

export function spawnGroup(file: string, args: string[], opts: GroupOptions): GroupChild {
  // detached: setsid(2), so the child leads a new group and nothing it starts escapes `kill(-pid)`.
  const { spawn } =
    process.getBuiltinModule?.("node:child_process") ?? (require("node:child_process") as typeof import("node:child_process"));
  const child = spawn(file, args, {
    cwd: opts.cwd,
    env: opts.env,
    stdio: [opts.stdin, "pipe", "pipe"],
    detached: true,
  }) as GroupChild["child"];
  let timedOut = false;
  let graceTimer: NodeJS.Timeout | undefined;
  const killGroup = () => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // the group is gone already
    }
  };
  let startGrace = () => undefined as void;
  const ended = new Promise<GroupEnd>((resolve, reject) => {
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      clearTimeout(graceTimer);
      resolve({ code, signal, timedOut });
    };
    startGrace = () => {
      graceTimer ??= setTimeout(() => {
        // A descendant outside the group (it made its own session) may still hold the pipes:
        // stop reading them rather than wait for it.
        killGroup();
        child.stdout.destroy();
        child.stderr.destroy();
        finish(child.exitCode, child.signalCode ?? (child.exitCode === null ? "SIGKILL" : null));
      }, CLOSE_GRACE_MS);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
      startGrace();
    }, opts.timeoutMs);
    child.on("exit", () => startGrace());
    child.on("close", (code, signal) => finish(code, signal));
    child.on("error", (err) => {
      clearTimeout(timer);
      clearTimeout(graceTimer);
      reject(err);
    });
  });
  ended.catch(() => undefined);
  return {
    child,
    kill: () => {
      killGroup();
      startGrace();
    },
    ended,
  };
}
