// What destroy, release-backing and reconcile do before the host removes a workspace: ask the
// host for the workspace's work with its uncommitted part recorded as a commit, bring it back into
// the Paseo side repository (bring-back.ts), and tell the host the token of what was brought back.
// The host deletes without keeping a copy only when that token names exactly what it finds then;
// anything else (a git-source workspace, a repository that is gone or refuses, a host report that
// fails the checks, files changed in between) is archived on the host, and the operation says
// where on stderr. So no path through here deletes work that is not somewhere else.
import type { Writable } from "node:stream";
import { RuntimeError, oneLine } from "../shared/errors.js";
import type { ArchivedWork, ReconcileRequest, ReconcileResult, WorkState } from "../shared/agent-api.js";
import type { RemoteHost } from "../transport/host.js";
import { bringBack } from "./bring-back.js";

/** The host's snapshot walks the whole checkout (git add --all): its own bound. */
const WORK_STATE_TIMEOUT_MS = 10 * 60_000;

export interface KeepWorkOptions {
  /** Where a note goes (the operation's stderr). */
  stderr: Writable;
  /** The operation's name, as each note starts. */
  operation: string;
  maxBytes?: number;
  /** The processes are about to be killed (destroy, reconcile): stopped before the snapshot. */
  freeze?: boolean;
}

/** Work that went nowhere but the host's archive is named, with its path and how long it stays. */
export function noteArchived(out: KeepWorkOptions, workspaceId: string, archived: ArchivedWork | null | undefined): void {
  if (!archived) return;
  out.stderr.write(
    `${out.operation}: the work of workspace ${JSON.stringify(workspaceId)} is kept on the host at ${archived.path} until ${archived.until} (see docs/workspaces.md "Work comes back")\n`,
  );
}

/**
 * Brings the workspace's work back; the token to pass to the host's removal, or null (the host
 * then keeps the work if there is any). Never throws for the work itself: a failure is one stderr
 * line and the host's archive takes over. A host out of reach (network) fails the operation.
 */
export async function bringBackBeforeRemoval(
  host: RemoteHost,
  workspaceId: string,
  owner: string,
  out: KeepWorkOptions,
): Promise<string | null> {
  let state: WorkState | null;
  try {
    ({ state } = await host.call(
      "workspace.work-state",
      { workspaceId, owner, snapshot: true, freeze: out.freeze === true },
      WORK_STATE_TIMEOUT_MS,
    ));
  } catch (err) {
    // A host out of reach cannot remove anything either: the operation fails as it would have.
    if (err instanceof RuntimeError && err.errorClass === "network") throw err;
    out.stderr.write(
      `${out.operation}: could not read the work of workspace ${JSON.stringify(workspaceId)}: ${oneLine((err as Error).message)}\n`,
    );
    return null;
  }
  if (!state || !state.workHome) return null;
  try {
    await bringBack(host, state, out.maxBytes === undefined ? {} : { maxBytes: out.maxBytes });
    return state.token;
  } catch (err) {
    out.stderr.write(
      `${out.operation}: could not bring the work of workspace ${JSON.stringify(workspaceId)} back to ${state.workHome.gitDir}: ${oneLine((err as Error).message)}\n`,
    );
    return null;
  }
}

/**
 * reconcile on one host: the orphans are named first (nothing removed), each one's work is brought
 * back, then the host removes them, keeping the work of any whose token does not match.
 */
export async function reconcileKeepingWork(
  host: RemoteHost,
  fields: Omit<ReconcileRequest, "list" | "mirrored">,
  out: KeepWorkOptions,
  timeoutMs?: number,
): Promise<ReconcileResult> {
  const { orphans = [] } = await host.call("workspace.reconcile", { ...fields, list: true }, timeoutMs);
  const mirrored: Record<string, string> = {};
  for (const id of orphans) {
    const token = await bringBackBeforeRemoval(host, id, fields.owner, out);
    if (token !== null) mirrored[id] = token;
  }
  const result = await host.call("workspace.reconcile", { ...fields, mirrored }, timeoutMs);
  for (const r of result.removed) noteArchived(out, r.workspaceId, r.archived);
  return result;
}
