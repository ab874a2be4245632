// The host half of the live mirror (docs/workspaces.md "Work comes back"): while someone on the
// Paseo side listens, every workspace whose work has somewhere to go (a sealed work home) is looked
// at four times a second, and when its refs moved the listener is told the workspace's work as it
// is now (work-state.ts, no snapshot: uncommitted work travels only at removal). A look is a few
// stats (HEAD, packed-refs, the loose branch files), so fifty idle workspaces cost about a
// millisecond a second (bench); git runs only when something moved. A first look reports every workspace,
// so a listener that (re)connects after an outage catches up on what it missed.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import type { WorkState } from "../../shared/agent-api.js";
import { WORKSPACE_PREFIX, rootLayout, workspaceLayoutOfKey, type WorkspaceLayout } from "../layout.js";
import type { WorkspaceManifest } from "./manifest.js";
import { parseManifest } from "./store.js";
import { readWorkState } from "./work-state.js";

export const WORK_LOOK_INTERVAL_MS = 250;
/** Loose branch files walked per workspace at most (past that, packed-refs and HEAD still count). */
const MAX_LOOSE_REFS = 10_000;

/** What changes whenever a ref of the checkout moves: stat identities, no file contents. */
export function refsFingerprint(checkout: string): string {
  const git = join(checkout, ".git");
  const parts: string[] = [];
  const stamp = (path: string, name: string) => {
    try {
      const st = statSync(path, { bigint: true });
      parts.push(`${name}:${st.ino}:${st.size}:${st.mtimeNs}`);
    } catch {
      parts.push(`${name}:-`);
    }
  };
  stamp(join(git, "HEAD"), "HEAD");
  stamp(join(git, "packed-refs"), "packed-refs");
  let budget = MAX_LOOSE_REFS;
  const walk = (dir: string, prefix: string) => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const n of names.sort()) {
      if (budget-- <= 0) return;
      const path = join(dir, n);
      let isDir = false;
      try {
        isDir = statSync(path).isDirectory();
      } catch {
        continue;
      }
      if (isDir) walk(path, `${prefix}${n}/`);
      else stamp(path, `${prefix}${n}`);
    }
  };
  walk(join(git, "refs", "heads"), "refs/heads/");
  return parts.join("\n");
}

interface Watched {
  manifestStamp: string;
  manifest: WorkspaceManifest | null;
  fingerprint: string | null;
}

/** Reads a workspace directory's manifest if it is one of ours that is ready and has a work home. */
function readMirrored(dir: string): WorkspaceManifest | null {
  try {
    const text = readFileSync(join(dir, "manifest.json"), "utf8");
    const raw = JSON.parse(text) as { workspaceId?: unknown };
    if (typeof raw.workspaceId !== "string") return null;
    const m = parseManifest(text, raw.workspaceId, basename(dir));
    return m && m.phase !== "materializing" && m.workHome ? m : null;
  } catch {
    return null;
  }
}

export interface WorkWatcher {
  /** The work of a workspace whose refs changed since the last look (all of them on the first). */
  moved(state: WorkState): void;
  /** A workspace reported before is gone (removed, or no longer mirrored). */
  gone(workspaceId: string): void;
  /** Whether anyone listens now: no look is taken while nobody does. */
  active(): boolean;
}

/** Looks at every mirrored workspace of `root` each `intervalMs` while `w.active()`; `stop()` ends it. */
export function watchWork(root: string, w: WorkWatcher, intervalMs = WORK_LOOK_INTERVAL_MS): { stop(): void } {
  const seen = new Map<string, Watched>();
  const forget = (key: string) => {
    const id = seen.get(key)?.manifest?.workspaceId;
    seen.delete(key);
    if (id !== undefined) w.gone(id);
  };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const look = async () => {
    if (!w.active()) return;
    const base = rootLayout(root).workspacesBase;
    const names = existsSync(base) ? readdirSync(base).filter((n) => n.startsWith(WORKSPACE_PREFIX)) : [];
    const present = new Set(names);
    for (const key of [...seen.keys()]) if (!present.has(WORKSPACE_PREFIX + key)) forget(key);
    for (const name of names) {
      if (stopped) return;
      const key = name.slice(WORKSPACE_PREFIX.length);
      const layout: WorkspaceLayout = workspaceLayoutOfKey(root, key);
      let entry = seen.get(key);
      let manifestStamp = "";
      try {
        const st = statSync(layout.manifest, { bigint: true });
        manifestStamp = `${st.ino}:${st.mtimeNs}:${st.size}`;
      } catch {
        forget(key);
        continue;
      }
      if (!entry || entry.manifestStamp !== manifestStamp) {
        const manifest = readMirrored(layout.dir);
        if (entry?.manifest && entry.manifest.workspaceId !== manifest?.workspaceId) forget(key);
        entry = { manifestStamp, manifest, fingerprint: null };
        seen.set(key, entry);
      }
      if (!entry.manifest) continue;
      const fingerprint = refsFingerprint(layout.checkout);
      if (fingerprint === entry.fingerprint) continue;
      try {
        const state = await readWorkState(layout, entry.manifest, false);
        entry.fingerprint = fingerprint;
        if (!stopped) w.moved(state);
      } catch {
        // Mid-removal, or a checkout git cannot read right now: looked at again next time.
      }
    }
  };
  const tick = () => {
    timer = undefined;
    void look()
      .catch(() => undefined)
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, intervalMs).unref();
      });
  };
  tick();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
