// Signals sent to the wrapper process (docs/contract.md#exec-signals): SIGINT, SIGTERM and SIGHUP are forwarded to
// the workload's process group on the remote. One that arrives before the workload exists is held
// (latest wins) and delivered right after `started`. Installed first thing, so no early signal
// kills the wrapper with its default action.
import { constants } from "node:os";

export const FORWARDED_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
export type ForwardedSignal = (typeof FORWARDED_SIGNALS)[number];

export class WrapperSignals {
  private pending: ForwardedSignal | null = null;
  private forward: ((s: ForwardedSignal) => void) | null = null;
  private readonly handlers = new Map<ForwardedSignal, () => void>();

  constructor() {
    for (const sig of FORWARDED_SIGNALS) {
      const h = () => this.receive(sig);
      this.handlers.set(sig, h);
      process.on(sig, h);
    }
  }

  private receive(sig: ForwardedSignal): void {
    if (this.forward) this.forward(sig);
    else this.pending = sig;
  }

  /** From now on signals go straight to `forward`; a held one is delivered immediately. */
  attach(forward: (s: ForwardedSignal) => void): void {
    this.forward = forward;
    const held = this.pending;
    this.pending = null;
    if (held) forward(held);
  }

  /** After `exit`: nothing more to forward. */
  detach(): void {
    for (const [sig, h] of this.handlers) process.off(sig, h);
    this.handlers.clear();
    this.forward = null;
  }
}

/** Signals whose default action ends a process: re-raising them mirrors a signal death (docs/contract.md#exec-exit-status). */
const TERMINATING = new Set([
  "SIGHUP",
  "SIGINT",
  "SIGQUIT",
  "SIGILL",
  "SIGTRAP",
  "SIGABRT",
  "SIGBUS",
  "SIGFPE",
  "SIGKILL",
  "SIGUSR1",
  "SIGSEGV",
  "SIGUSR2",
  "SIGALRM",
  "SIGTERM",
  "SIGSTKFLT",
  "SIGXCPU",
  "SIGXFSZ",
  "SIGVTALRM",
  "SIGPROF",
  "SIGIO",
  "SIGPOLL",
  "SIGPWR",
  "SIGSYS",
]);

/**
 * Mirrors the workload's result in our own exit status: re-raise a terminating signal (handlers
 * removed first), else exit with the code (`code ?? 1`); a non-terminating signal maps to 128+n.
 */
export function mirrorExit(code: number | null, signal: string | null): number {
  if (signal) {
    const n = (constants.signals as Record<string, number>)[signal];
    if (TERMINATING.has(signal) && n !== undefined) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal as NodeJS.Signals);
    }
    return n !== undefined ? 128 + n : 1;
  }
  return code ?? 1;
}
