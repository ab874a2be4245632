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
 * Linux's numbers for the signals of a Linux host that macOS and the BSDs do not have: the
 * workload may die of one there, and the wrapper (on a laptop) then exits 128 + that number.
 */
const LINUX_ONLY_SIGNALS: Readonly<Record<string, number>> = { SIGSTKFLT: 16, SIGPOLL: 29, SIGPWR: 30 };

/**
 * Mirrors the workload's result in our own exit status: re-raise a terminating signal (handlers
 * removed first), else exit with the code (`code ?? 1`); a non-terminating signal maps to 128+n.
 * Signal names come from the remote host, numbers from this OS (`local`: they differ between
 * Linux and macOS); a signal this OS does not know is not raised, and maps to 128 + its Linux number.
 */
export function mirrorExit(
  code: number | null,
  signal: string | null,
  local: Readonly<Record<string, number>> = constants.signals,
): number {
  if (signal) {
    const n = local[signal];
    if (n === undefined) return LINUX_ONLY_SIGNALS[signal] !== undefined ? 128 + LINUX_ONLY_SIGNALS[signal] : 1;
    if (TERMINATING.has(signal)) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal as NodeJS.Signals);
    }
    return 128 + n;
  }
  return code ?? 1;
}
