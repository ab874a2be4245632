// Terminals owned by a long-lived host process instead of sshd, so a terminal outlives the SSH
// channel that watches it. Node cannot allocate a pty or pass descriptors, so a tiny relay does:
// the host's python3 running relay.py (preferred), else util-linux `script` + `stty` with our
// node child (script-child.cjs). Both texts are embedded in the agent bundle and written next to
// the agent once. Where neither works, the probe says "none": keep sshd's pty (the exec path today).
//
// API (Linux hosts; node >= 18, built-ins only):
//   const support = await probeTerminalSupport(agentDir, { searchPath?, nodePath? })
//     → { method: "python3" | "script", … } | { method: "none", reason }. Probed for real once
//       (opens and sizes a pty), cached in <agentDir>/terminal-support.json keyed by the programs
//       found; later calls cost a few stat calls. A "none" is re-probed after 10 minutes.
//   const t = await spawnTerminal(support, { file, args, argv0, cwd, env, rows, cols, tagFd? })
//     resolves once the workload runs (t.pid/pgid/sid/startTime set) or could not be executed
//     (t.spawnError = {code: 127 for ENOENT | 126, message}; the message is also printed on the
//     terminal, like a shell; t.exited gives the code). Rejects (RuntimeError) only when the relay
//     itself cannot start or report within 10 s; then nothing is left running.
//   const idle = startIdleRelay(support)   (python3 only, else null) a relay started ahead of its
//     exec, waiting for the launch; spawnTerminal(support, {...spec, tagPath}, idle) uses it when
//     still usable, so that exec does not wait for the interpreter (idle.discard() ends it unused).
//
// Guarantees:
//   * The pty has the requested size before the workload exists. The workload leads its own
//     session with the terminal as controlling tty, on stdin/stdout/stderr, in the foreground
//     process group (job control, SIGWINCH). python3: pgid = sid = pid. script: the session is led
//     by our child (pgid = sid = its pid) and the workload shares its foreground group.
//   * Exact argv0/args/env/cwd: nothing is added to the env (no TERM unless given). The terminal
//     starts with the kernel's default modes plus IUTF8; bytes pass raw both ways.
//   * tagFd is the workload's fd 47 and no relay process holds an fd 47, so relays are never
//     members of the workspace's process set (their command lines also name the agent dir).
//   * Backpressure: output not read → the relay stops reading the pty → the workload blocks;
//     input is taken one chunk at a time as the terminal accepts it. Bounded memory in python3
//     mode. In script mode `script` itself (util-linux >= 2.35) queues input the workload does not
//     read without bound: the daemon must limit what it writes to a terminal nobody reads.
//   * resize(rows, cols): TIOCSWINSZ (script: `stty`, which sets rows and cols in two steps),
//     then true only if the terminal side reads back exactly that size; the kernel sends SIGWINCH
//     to the foreground group and the answer waits (≤ 800 ms) until no process of that group
//     still has it pending, so input sent after the answer does not overtake it. Answers arrive
//     in order. false for invalid sizes and once the workload has exited.
//   * signal(name) goes to the workload's current process group (script: our child excluded).
//   * exited: {code, null} or {null, "SIGTERM"} — the real wait status, never 128+n. It resolves
//     after the relay forwarded the last output: once the workload exits, output still in the
//     pty is forwarded until it has been idle 1 s (time the reader held it back not counted),
//     at most 10 s. end() on input only stops input (a terminal has no end of input).
//   * close(), or the controller's death (control descriptor EOF, output or status unwritable):
//     the relay closes the pty master (kernel hang-up: SIGHUP to the session leader), sends
//     SIGHUP + SIGCONT to the workload's group, waits up to 1 s, then SIGKILLs everything left in
//     the terminal's session and reaps. Processes that left the session (setsid) are the process
//     set's to reap. A relay killed with SIGKILL only gets the kernel's hang-up.
export { probeTerminalSupport, type ProbeOptions, type TerminalSupport, type UsableTerminalSupport } from "./probe.js";
export { spawnTerminal, startIdleRelay, type IdleRelay, type Terminal, type TerminalExit, type TerminalSpec } from "./driver.js";
