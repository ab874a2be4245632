// PTY-mode exec on a terminal this agent process owns (the host daemon, normally), through the
// relay of ../terminal (python3 or util-linux `script`). The terminal is then part of the exec's
// own conversation exactly like a pipes workload: its output travels as Stdout frames under the
// same output window and acknowledgements, keyboard input as Stdin frames acknowledged once the
// relay took them, and a `resize` is applied by the relay (TIOCSWINSZ, read back, SIGWINCH
// delivered) before `resized` answers it. No SSH channel of its own and no extra round trip: the
// exec starts as fast as a pipes exec plus the relay's start-up, and it is as long-lived as the
// process that owns it, not as an SSH channel.
//
// The relay is our process, not the workload's: it holds no exec tag and is in none of the
// workload's sessions, so it is never a member of the process set: pause freezes the workload
// (the relay then just waits, idle), destroy kills the workload (the relay reports its exit and
// ends). Losing the conversation is the exec loss rule's decision, as for pipes; when it reaps,
// the terminal is closed too (the relay hangs it up and exits).
import { RuntimeError } from "../../shared/errors.js";
import { FrameKind, type Frame } from "../../shared/frames.js";
import { decodeRuntimeMessage, type ExecRunRequest } from "../../shared/agent-api.js";
import type { ConversationEnd } from "../context.js";
import type { ExecContext } from "./exec-session.js";
import { spawnTerminal, type IdleRelay, type Terminal, type TerminalExit, type UsableTerminalSupport } from "../terminal/host-terminals.js";
import { closeTag, openTag, type Launch } from "./launch.js";
import type { ExecSupervisor } from "./supervisor.js";
import { execTagPath } from "../proc/process-set.js";
import { OutputFlow, StdinForwarder } from "./pipes.js";
import { conversationLost } from "./sessions.js";

type Outcome = { exit: TerminalExit } | { failed: unknown } | { lost: ConversationEnd };

/** How runTerminal runs one PTY exec. */
export interface TerminalRun {
  support: UsableTerminalSupport;
  launch: Launch;
  req: ExecRunRequest & { stdio: { kind: "pty" } };
  /** A relay started ahead of this exec (used if still usable), and what to do once it runs. */
  idle: IdleRelay | undefined;
  afterStart: () => void;
}

export async function runTerminal(ctx: ExecContext, sup: ExecSupervisor, run: TerminalRun): Promise<void> {
  const { support, launch, req, idle, afterStart } = run;
  const stdin = new StdinForwarder(ctx);
  const flow = new OutputFlow(ctx);
  let term: Terminal | null = null;
  // Resizes are answered in the order they came, each once applied (the relay answers in order too).
  let resizing = Promise.resolve();
  const resize = (id: number, rows: number, cols: number) => {
    resizing = resizing.then(async () => {
      if (!term) return;
      const ok = await term.resize(rows, cols);
      // A terminal whose workload has exited takes no size any more; the exit follows and ends the
      // exec, so a refusal here would only turn a finished exec into a failed one.
      if (!ok && !sup.leaderAlive()) return;
      ctx.sendJson({ type: "resized", id, ok });
    });
  };
  ctx.onFrame((f: Frame) => {
    // A terminal has no end of input: an Eof frame only means no more keystrokes (nothing to do).
    if (f.kind === FrameKind.Stdin) stdin.data(f.payload);
    else if (f.kind === FrameKind.Json) {
      const msg = decodeRuntimeMessage(f.payload);
      if (msg?.type === "signal") sup.deliver(msg.signal);
      else if (msg?.type === "resize") resize(msg.id, msg.rows, msg.cols);
    }
  });
  const closed = new Promise<ConversationEnd>((resolve) => ctx.onClose(resolve));

  const tagPath = execTagPath(sup.layout, sup.execId);
  const tagFd = openTag(tagPath);
  const spec = {
    file: launch.file,
    args: launch.args,
    argv0: launch.argv0,
    cwd: launch.cwd,
    env: req.env,
    rows: req.stdio.rows,
    cols: req.stdio.cols,
    tagFd,
    tagPath,
  };
  let t: Terminal;
  try {
    // A relay started ahead that failed (it ended meanwhile) has left nothing running: start anew.
    t = await spawnTerminal(support, spec, idle).catch((err: unknown) => (idle ? spawnTerminal(support, spec) : Promise.reject(err)));
  } finally {
    closeTag(tagFd);
    if (idle?.usable) idle.discard(); // not taken (it had ended, or the support changed)
  }
  term = t;
  // A program that could not be executed has no identity; the relay already showed why on the
  // terminal (like a shell would) and `exited` carries 126/127.
  await sup.publish(t.pid !== null ? { pid: t.pid, pgid: t.pgid!, sid: t.sid!, startTime: t.startTime! } : null);
  if (sup.abandoned) {
    await t.close();
    return;
  }
  afterStart();
  stdin.attach(t.input);
  const drained = flow.pump(t.output, FrameKind.Stdout);
  const outcome: Outcome = await Promise.race([
    t.exited.then(
      (exit) => ({ exit }),
      (failed: unknown) => ({ failed }),
    ),
    closed.then((lost) => ({ lost })),
  ]);
  if ("lost" in outcome) {
    await conversationLost(sup, outcome.lost);
    await t.close();
    return;
  }
  if ("failed" in outcome) {
    await t.close();
    throw outcome.failed instanceof RuntimeError ? outcome.failed : new RuntimeError("remote", String(outcome.failed));
  }
  // The relay forwarded everything the terminal showed before it reported the exit; what it
  // wrote is read to its end here (at the reader's pace) before `exit`, which ends the exec.
  await Promise.race([drained, closed]);
  await resizing;
  sup.complete(outcome.exit.code, outcome.exit.signal);
}
