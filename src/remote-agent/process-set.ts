// The workspace's process set: every remote process its execs started, including setsid'd and
// re-parented descendants. Used by pause (SIGSTOP sweep), resume (SIGCONT), destroy/reconcile
// (SIGKILL) and the exec supervisor. Implementation owned by the exec feature.
import type { WorkspaceLayout } from "./layout.js";

export interface ProcessInfo {
  pid: number;
  state: string;
  command: string;
}

/** Lists the live processes of the workspace (diagnostics and tests). */
export async function listWorkspaceProcesses(_layout: WorkspaceLayout): Promise<ProcessInfo[]> {
  return [];
}

/** SIGSTOPs every process of the set, repeating the sweep until no new member appears. */
export async function freezeWorkspaceProcesses(_layout: WorkspaceLayout): Promise<void> {}

/** SIGCONTs exactly the processes of the set. */
export async function thawWorkspaceProcesses(_layout: WorkspaceLayout): Promise<void> {}

/** SIGKILLs every process of the set (works on stopped processes too) and waits, bounded. */
export async function killWorkspaceProcesses(_layout: WorkspaceLayout): Promise<void> {}
