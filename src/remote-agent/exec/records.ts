// Exec identity records: `<dir>/execs/<sha(execId)>.json`, one per execution id, kept for the
// life of the workspace (destroy removes them). They let the out-of-band `signal` operation find a
// workload (pid + start time, so a reused pid is never signalled) and answer unambiguously:
//   starting  → identity not published yet ("not ready", 75)
//   running   → signal the exec's tree and wait until it is gone
//   done | refused | abandoned → already gone (0); an abandoned exec's leftovers are reaped first
// Creation is exclusive (hard link of a complete temp file), so an exec id is never reused;
// every later update is temp file + rename, so readers never see a partial record.
import { linkSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { randomBytes } from "node:crypto";
import { RuntimeError } from "../../shared/errors.js";
import { hashName, type WorkspaceLayout } from "../layout.js";

export type ExecState = "starting" | "running" | "done" | "refused" | "abandoned";

export interface ExecRecord {
  execId: string;
  state: ExecState;
  /** The agent process supervising the exec (the host daemon): its death means nobody reports or reaps it. */
  agentPid: number;
  agentStartTime: string | null;
  pid?: number;
  pgid?: number;
  sid?: number;
  /** /proc/<pid>/stat field 22 (macOS: ps lstart). */
  startTime?: string;
  code?: number | null;
  signal?: string | null;
  /** Abandoned execs: whether their process tree has been killed. */
  reaped?: boolean;
  updatedAt: string;
}

export function execRecordPath(layout: WorkspaceLayout, execId: string): string {
  return join(layout.execs, `${hashName(execId)}.json`);
}

export function readRecordFile(path: string): ExecRecord | null {
  try {
    const rec = JSON.parse(readFileSync(path, "utf8")) as ExecRecord;
    return typeof rec === "object" && rec !== null && typeof rec.state === "string" ? rec : null;
  } catch {
    return null;
  }
}

export function readExecRecord(layout: WorkspaceLayout, execId: string): ExecRecord | null {
  return readRecordFile(execRecordPath(layout, execId));
}

/** Creates the record exclusively; fails when this exec id was ever used in the workspace. */
export function createExecRecord(layout: WorkspaceLayout, record: Omit<ExecRecord, "updatedAt">): void {
  // Not recursive: a workspace directory removed meanwhile must not be recreated.
  try {
    mkdirSync(layout.execs, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  const path = execRecordPath(layout, record.execId);
  const tmp = join(layout.execs, `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  writeFileSync(tmp, JSON.stringify({ ...record, updatedAt: new Date().toISOString() }) + "\n", { mode: 0o600, flag: "wx" });
  try {
    linkSync(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") {
      throw new RuntimeError("input", `Execution id was already used in this workspace: ${record.execId}`);
    }
    throw err;
  } finally {
    unlinkSync(tmp);
  }
}

/**
 * Replaces the record (temp file + rename). Never recreates directories: when destroy removed the
 * workspace while the exec finished, there is nothing left to record and the update is skipped
 * (recreating `<dir>/execs` would leave a remote leftover behind a destroyed workspace).
 */
export function updateExecRecord(layout: WorkspaceLayout, record: ExecRecord, patch: Partial<ExecRecord>): ExecRecord {
  const next = { ...record, ...patch, updatedAt: new Date().toISOString() };
  const path = execRecordPath(layout, record.execId);
  const tmp = join(layout.execs, `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  try {
    writeFileSync(tmp, JSON.stringify(next) + "\n", { mode: 0o600, flag: "wx" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return next;
    throw err;
  }
  renameSync(tmp, path);
  return next;
}
