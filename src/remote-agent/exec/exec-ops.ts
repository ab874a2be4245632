// Agent operations of the exec feature:
//   exec.run        one execution (pipes or PTY), streaming; refusals arrive as an error frame
//                   before `started`, so the runtime can refuse without any fd4 event
//   exec.signal     the out-of-band `signal` operation (identity-checked, waits until gone)
//   exec.processes  the workspace's live process set (diagnostics and tests)
//   exec.attach     a wrapper re-attaches to its resumable exec after the link was lost (streaming)
// (A wrapper that died during an outage is reported by a client-gone stream: clientGone() in exec-session.ts.)
import { RuntimeError, toWireError } from "../../shared/errors.js";
import { parse } from "../../shared/guards.js";
import { ExecSession, findSession, resumeOf } from "./exec-session.js";
import type { AgentContext, OneShotHandlers } from "../context.js";
import { readProcStat, isGone } from "../../shared/proc-stat.js";
import { createExecRecord, readExecRecord, updateExecRecord, type ExecRecord } from "./records.js";
import { resolveLaunch, resolveWorkloadCwd } from "./launch.js";
import { checkArgSpace } from "./arg-space.js";
import { checkProcessStrings, parseRunRequest } from "./request.js";
import { ExecAttachRequest, ExecProcessesRequest, ExecSignalRequest, type ExecRunRequest } from "../../shared/agent-api.js";
import { execHooks } from "../test-hooks.js";
import { ExecSupervisor } from "./supervisor.js";
import { execSupervisors } from "./sessions.js";
import { namedPorts } from "./named-ports.js";
import { runPipes } from "./pipes.js";
import { runPty } from "./pty.js";
import { execMembers, killMembers, listWorkspaceProcesses } from "../proc/process-set.js";
import { workspaceLayout } from "../layout.js";
import { loadWorkspace } from "../workspace/store.js";
import { sendSignal } from "../../shared/proc-stat.js";
import { sleep } from "../../shared/async.js";

/** How long `exec.signal` waits for the workload to be gone (Paseo's whole budget is 750 ms). */
const SIGNAL_WAIT_MS = 500;
const POLL_MS = 10;

function notReady(phase: string, workspaceId: string): RuntimeError {
  const status = phase === "materializing" ? "incomplete" : phase;
  return new RuntimeError("remote", `SSH workspace is ${status}: ${workspaceId}`);
}

export async function execRun(first: AgentContext): Promise<void> {
  const req: ExecRunRequest = parseRunRequest(first.request);
  // Created before anything can wait, so no frame the wrapper sent after its request is missed.
  const session = new ExecSession(first, resumeOf(req.resume));
  const ctx = session.context;
  const loaded = loadWorkspace(ctx.root, req.workspaceId, req.owner);
  if (loaded.state === "missing") throw new RuntimeError("remote", `SSH workspace is missing: ${req.workspaceId}`);
  const { layout, manifest } = loaded;
  const starting: Omit<ExecRecord, "updatedAt"> = {
    execId: req.execId,
    state: "starting",
    agentPid: process.pid,
    agentStartTime: readProcStat(process.pid)?.startTime ?? null,
  };
  createExecRecord(layout, starting);
  const record = { ...starting, updatedAt: "" };
  let launch;
  try {
    if (manifest.phase !== "ready") throw notReady(manifest.phase, req.workspaceId);
    checkProcessStrings(req.argv, req.env);
    const cwd = resolveWorkloadCwd(manifest.workspaceRoot, req.cwd);
    launch = resolveLaunch(req.argv, req.env, cwd, ctx.agentDir, ctx.nodePath);
    if (launch) checkArgSpace(launch, req.env);
  } catch (err) {
    updateExecRecord(layout, record, { state: "refused" });
    throw err;
  }
  const sup = new ExecSupervisor({
    ctx,
    layout,
    record,
    workspaceId: req.workspaceId,
    owner: req.owner,
    signals: req.stdio.kind === "pty" ? "tree" : "group",
    hooks: execHooks(ctx.root, req.execId),
    namedPorts: namedPorts(req.env),
  });
  // Live until its exit was received by the wrapper or its tree is reaped (the daemon's idle rule
  // counts these), findable by its token for a wrapper re-attaching meanwhile.
  execSupervisors.add(sup);
  session.register();
  try {
    if (req.stdio.kind === "pty") await runPty(ctx, sup, launch, req);
    else await runPipes(ctx, sup, launch, req);
  } catch (err) {
    let wire = err;
    await sup.settleUnfinished().catch((e: Error) => {
      wire = new RuntimeError("remote", `${(err as Error).message}; reaping the exec failed too: ${e.message}`);
    });
    // Through the session: numbered and kept like every other frame, so a re-attached wrapper gets it.
    ctx.sendJson({ type: "error", ...toWireError(wire) });
  }
  try {
    await session.done;
  } finally {
    execSupervisors.delete(sup);
  }
}

/** `exec.attach`: a wrapper whose stream was lost takes its session over; ends when let go again. */
export async function execAttach(ctx: AgentContext): Promise<void> {
  const { token, received, gen } = parse(ExecAttachRequest, ctx.request, (why) => new RuntimeError("input", why!));
  const session = findSession(token);
  if (!session) {
    throw new RuntimeError(
      "remote",
      "the host daemon no longer knows this exec: it was reaped after the reconnect grace, or the daemon restarted (its workloads were reaped)",
      { code: "unknown-exec" },
    );
  }
  await session.attach(ctx, received, gen);
}

async function waitGone(targets: Array<{ pid: number; startTime: string }>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (targets.every((t) => isGone(t.pid, t.startTime))) return true;
    if (Date.now() >= deadline) return false;
    await sleep(POLL_MS);
  }
}

/** These ids as text, as `signal` and `processes` have always read them (absent = "", a number = its digits). */
function idsAsText(r: Record<string, unknown>, ...names: string[]): Record<string, string> {
  return Object.fromEntries(names.map((n) => [n, String(r[n] ?? "")]));
}

/**
 * The `signal` operation. Answers by record state (see records.ts): only a genuinely starting
 * exec is "not ready"; a starting record whose agent died is treated as abandoned and reaped.
 */
async function execSignal(ctx: AgentContext): Promise<{ state: string }> {
  const r = ctx.request;
  // A wait that is not a number is the default one.
  const given = { ...r, ...idsAsText(r, "workspaceId", "execId", "owner"), waitMs: typeof r.waitMs === "number" ? r.waitMs : undefined };
  const { signal, workspaceId, execId, owner, waitMs } = parse(ExecSignalRequest, given, (why) => {
    return new RuntimeError("input", why ?? `Unsupported signal: ${String(r.signal)}`);
  });
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  // A missing workspace has no processes (destroy kills the set before removing it).
  if (loaded.state === "missing") return { state: "missing" };
  const { layout } = loaded;
  let rec = readExecRecord(layout, execId);
  if (!rec) throw new RuntimeError("not-ready", "execution identity is not ready");
  if (rec.state === "starting") {
    if (!isGone(rec.agentPid, rec.agentStartTime ?? undefined)) throw new RuntimeError("not-ready", "execution identity is not ready");
    rec = updateExecRecord(layout, rec, { state: "abandoned", reaped: false });
  }
  if (rec.state === "done" || rec.state === "refused" || (rec.state === "abandoned" && rec.reaped)) return { state: rec.state };
  if (rec.state === "abandoned") {
    await killMembers(() => execMembers(layout, execId, rec.pgid), `exec ${execId}`);
    updateExecRecord(layout, rec, { reaped: true });
    return { state: "abandoned" };
  }
  // running: signal the verified leader and every member of the exec's tree, then wait.
  const targets = execMembers(layout, execId, rec.pgid).map((m) => ({ pid: m.pid, startTime: m.startTime }));
  if (rec.pid && rec.startTime && !isGone(rec.pid, rec.startTime) && !targets.some((t) => t.pid === rec.pid)) {
    targets.push({ pid: rec.pid, startTime: rec.startTime });
  }
  for (const t of targets) {
    if (!isGone(t.pid, t.startTime)) sendSignal(t.pid, signal);
  }
  const wait = typeof waitMs === "number" && waitMs > 0 ? Math.min(waitMs, 5000) : SIGNAL_WAIT_MS;
  if (!(await waitGone(targets, wait))) {
    const left = targets.filter((t) => !isGone(t.pid, t.startTime)).map((t) => t.pid);
    throw new RuntimeError("remote", `workload still alive after ${signal}: pid ${left.join(", ")}`);
  }
  return { state: "running" };
}

async function execProcesses(ctx: AgentContext) {
  const given = { ...ctx.request, ...idsAsText(ctx.request, "workspaceId", "owner") };
  const { workspaceId, owner } = parse(ExecProcessesRequest, given, (why) => new RuntimeError("input", why!));
  // Diagnostics must also see leftovers of a destroyed workspace, so a missing one is listed too.
  const loaded = loadWorkspace(ctx.root, workspaceId, owner);
  const layout = loaded.state === "present" ? loaded.layout : workspaceLayout(ctx.root, workspaceId);
  return { processes: await listWorkspaceProcesses(layout) };
}

export const execOps = {
  "exec.signal": execSignal,
  "exec.processes": execProcesses,
} satisfies Partial<OneShotHandlers>;
