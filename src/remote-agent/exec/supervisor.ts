// State shared by both exec modes on the agent: the identity record, publication of `started`,
// delivery of forwarded signals, completion, and the abandonment rule. A mode module (pipes or
// PTY) drives one supervisor per exec; the record on disk is what the `signal` op reads.
import { RuntimeError } from "../../shared/errors.js";
import { FrameKind, encodeData, encodeFrame } from "../../shared/frames.js";
import { notFoundMessage } from "./request.js";
import type { AgentContext } from "../context.js";
import { readProcStat, isGone, sendSignal, type ProcStat } from "../../shared/proc-stat.js";
import { updateExecRecord, type ExecRecord } from "./records.js";
import { execMembers, killMembers, recordSession } from "../proc/process-set.js";
import type { WorkspaceLayout } from "../layout.js";
import { loadWorkspace } from "../workspace/store.js";
import { sleep } from "../../shared/async.js";
import { ABANDON_GRACE_MS } from "../../shared/exec-session-core.js";
import type { ExecHooks } from "../test-hooks.js";

export interface ExecIdentity {
  pid: number;
  pgid: number;
  sid: number;
  startTime: string;
}

export function identityOf(st: ProcStat): ExecIdentity {
  return { pid: st.pid, pgid: st.pgid, sid: st.sid, startTime: st.startTime };
}

/** What one exec's supervisor is made of. */
export interface SupervisorOptions {
  ctx: AgentContext;
  layout: WorkspaceLayout;
  record: ExecRecord;
  workspaceId: string;
  owner: string;
  /** Pipes: the workload leads its own group. PTY: job control moves its processes between groups, so signal the tree. */
  signals: "group" | "tree";
  hooks: ExecHooks;
  /** Ports the exec's env names for Paseo's services (port-watch.ts forwards them first). */
  namedPorts?: number[];
}

export class ExecSupervisor {
  published = false;
  finished = false;
  abandoned = false;
  private ident: ExecIdentity | null = null;
  private pendingSignal: NodeJS.Signals | null = null;

  readonly ctx: AgentContext;
  readonly layout: WorkspaceLayout;
  readonly workspaceId: string;
  readonly owner: string;
  readonly hooks: ExecHooks;
  readonly namedPorts: number[];
  readonly startedAt = Date.now();
  private record: ExecRecord;
  private readonly signals: "group" | "tree";

  constructor(opts: SupervisorOptions) {
    this.ctx = opts.ctx;
    this.layout = opts.layout;
    this.workspaceId = opts.workspaceId;
    this.owner = opts.owner;
    this.hooks = opts.hooks;
    this.record = opts.record;
    this.signals = opts.signals;
    this.namedPorts = opts.namedPorts ?? [];
  }

  get execId(): string {
    return this.record.execId;
  }

  /** Records the running identity, then (and only then) tells the runtime `started`. */
  async publish(ident: ExecIdentity | null): Promise<void> {
    // Test-only hook (test-hooks.ts): widens the window between launch and publication.
    if (this.hooks.delayIdentityMs > 0) await sleep(this.hooks.delayIdentityMs);
    if (this.finished || this.abandoned) return;
    this.ident = ident;
    if (ident) recordSession(this.layout, this.execId, ident);
    this.record = updateExecRecord(this.layout, this.record, ident ? { state: "running", ...ident } : { state: "running" });
    this.published = true;
    this.ctx.sendJson({ type: "started", pid: ident?.pid ?? null });
    this.freezeIfPaused();
    if (this.pendingSignal) this.deliver(this.pendingSignal);
  }

  /** A pause that raced this exec's admission must not leave it running. */
  private freezeIfPaused(): void {
    try {
      const loaded = loadWorkspace(this.ctx.root, this.workspaceId, this.owner);
      if (loaded.state === "present" && loaded.manifest.phase !== "ready") {
        for (const m of execMembers(this.layout, this.execId, this.ident?.pgid)) sendSignal(m.pid, "SIGSTOP");
      }
    } catch {
      // Ownership changed under us: the destroy or reconcile that did it reaps the tree.
    }
  }

  leaderAlive(): boolean {
    return this.ident !== null && !isGone(this.ident.pid, this.ident.startTime);
  }

  /** Delivers a forwarded signal: to the workload's group (pipes) or to its whole tree (PTY). */
  deliver(signal: NodeJS.Signals): void {
    if (!this.published) {
      this.pendingSignal = signal;
      return;
    }
    if (this.ident && this.signals === "group" && this.leaderAlive()) {
      try {
        process.kill(-this.ident.pgid, signal);
        return;
      } catch {
        // Fall back to the tree below.
      }
    }
    for (const m of execMembers(this.layout, this.execId, this.ident?.pgid)) sendSignal(m.pid, signal);
  }

  /** Records the real wait status and reports it; nothing follows `exit` on the channel. */
  complete(code: number | null, signal: string | null): void {
    if (this.finished || this.abandoned) return;
    this.finished = true;
    this.record = updateExecRecord(this.layout, this.record, { state: "done", code, signal });
    this.ctx.sendJson({ type: "exit", code, signal });
  }

  /** A bare name not found on PATH: reported like a shell would (stderr line, exit 127), no process. */
  async notFound(argv0: string): Promise<void> {
    await this.publish(null);
    for (const fr of encodeData(FrameKind.Stderr, Buffer.from(notFoundMessage(argv0)))) this.ctx.sendRaw(fr);
    this.ctx.sendRaw(encodeFrame(FrameKind.Eof, Buffer.from([1])));
    this.ctx.sendRaw(encodeFrame(FrameKind.Eof, Buffer.from([2])));
    this.complete(127, null);
  }

  /** The exec could not run after all (e.g. its PTY never attached): record it as refused. */
  refuse(err: RuntimeError): never {
    this.finished = true;
    this.record = updateExecRecord(this.layout, this.record, { state: "refused" });
    throw err;
  }

  /**
   * The run failed unexpectedly before reporting an exit: nobody will report or reap this exec,
   * so it is recorded abandoned and its tree (if anything started) reaped now, as the exit of a
   * one-shot agent would have caused. A long-lived daemon must not leave it "starting" forever.
   */
  async settleUnfinished(): Promise<void> {
    if (this.finished || this.abandoned) return;
    await this.abandon(0);
  }

  /**
   * The control channel ended without an orderly close: after the grace, mark the exec abandoned
   * and kill its tree so no orphan stays on the host. Resolves when that is done (or not needed).
   */
  async abandon(graceMs = ABANDON_GRACE_MS): Promise<void> {
    await sleep(graceMs);
    if (this.finished) return;
    this.abandoned = true;
    this.record = updateExecRecord(this.layout, this.record, { state: "abandoned", reaped: false });
    await killMembers(() => execMembers(this.layout, this.execId, this.ident?.pgid), `exec ${this.execId}`);
    this.record = updateExecRecord(this.layout, this.record, { reaped: true });
  }
}

export function identityNow(pid: number): ExecIdentity | null {
  const st = readProcStat(pid);
  return st ? identityOf(st) : null;
}
