// The execs this agent process supervises, and the one rule for what losing the conversation that
// carries an exec means. The host daemon reads the count (it exits only when none is live); a
// one-shot agent reaps them all when it is hung up on.
import type { ConversationEnd } from "../context.js";
import type { ExecSupervisor } from "./supervisor.js";
import { reapDelayMs } from "../../shared/exec-session-core.js";
import type { WorkspaceLayout } from "../layout.js";

class ExecSupervisors {
  private readonly live = new Set<ExecSupervisor>();
  /** Called when an exec becomes live (the daemon's port watch starts looking). */
  onAdd: (() => void) | null = null;

  add(sup: ExecSupervisor): void {
    this.live.add(sup);
    this.onAdd?.();
  }

  /** The workspaces that have a live exec, by id. */
  workspaces(): Map<string, WorkspaceLayout> {
    const out = new Map<string, WorkspaceLayout>();
    for (const s of this.live) if (!s.finished) out.set(s.workspaceId, s.layout);
    return out;
  }

  /** The ports live execs' env names for Paseo's services, by workspace id: port → when the newest such exec started. */
  namedPorts(): Map<string, Map<number, number>> {
    const out = new Map<string, Map<number, number>>();
    for (const s of this.live) {
      if (s.finished || s.namedPorts.length === 0) continue;
      const ports = out.get(s.workspaceId) ?? new Map<number, number>();
      for (const p of s.namedPorts) ports.set(p, Math.max(ports.get(p) ?? 0, s.startedAt));
      out.set(s.workspaceId, ports);
    }
    return out;
  }

  delete(sup: ExecSupervisor): void {
    this.live.delete(sup);
  }

  get size(): number {
    return this.live.size;
  }

  /** Reaps every live exec at once (the supervising process is being stopped); the failures. */
  async abandonAll(): Promise<string[]> {
    const results = await Promise.allSettled([...this.live].map((s) => s.abandon(0)));
    return results.flatMap((r) => (r.status === "rejected" ? [String((r.reason as Error)?.message ?? r.reason)] : []));
  }
}

export const execSupervisors = new ExecSupervisors();

/**
 * The exec's conversation ended for good before its exit was reported: the exec is recorded
 * abandoned and its tree reaped, when the loss rule says (reapDelayMs in src/shared/exec-session-core.ts).
 */
export function conversationLost(sup: ExecSupervisor, how: ConversationEnd): Promise<void> {
  return sup.abandon(reapDelayMs(how));
}
