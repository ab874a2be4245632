// Terminals owned by a long-lived host process instead of sshd, so that a PTY exec outlives the
// SSH channel that watches it. Node cannot allocate a pty, so a relay does: the host's python3
// running relay.py, else util-linux `script` with script-child.cjs; where neither works the probe
// says "none" and the exec keeps sshd's pty. terminal-probe.ts finds the way once per host, driver.ts runs
// one terminal; its Terminal interface says what a terminal guarantees.
export { probeTerminalSupport, type ProbeOptions, type TerminalSupport, type UsableTerminalSupport } from "./terminal-probe.js";
export { spawnTerminal, startIdleRelay, type IdleRelay, type Terminal, type TerminalExit, type TerminalSpec } from "./driver.js";
