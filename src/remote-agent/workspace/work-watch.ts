// The host half of the live mirror (docs/workspaces.md "Work comes back"): while someone on the
// Paseo side listens, every workspace whose work has somewhere to go (a sealed work home) is
// watched, and when its refs moved the listener is told the workspace's work as it is now
// (work-state.ts, no snapshot: uncommitted work travels only at removal). inotify says which
// workspaces to look at (their directory, the checkout's .git, refs/heads and its folders), so an
// idle workspace costs nothing between events; every workspace is still looked at every
// SAFETY_LOOK_MS (a watch that could not be set up, inotify limits, a replaced .git), and a
// workspace without a working watch every tick. A look is a few stats (HEAD, packed-refs, the
// loose branch files); git runs only when something moved. A first look reports every workspace,
// so a listener that (re)connects after an outage catches up on what it missed.
import { existsSync, readdirSync, readFileSync, statSync, watch, type FSWatcher } from "node:fs";
import { basename, join } from "node:path";
import type { WorkState } from "../../shared/agent-api.js";
import { WORKSPACE_PREFIX, rootLayout, workspaceLayoutOfKey, type WorkspaceLayout } from "../layout.js";
import type { WorkspaceManifest } from "./manifest.js";
import { parseManifest } from "./store.js";
import { readWorkState } from "./work-state.js";

export const WORK_LOOK_INTERVAL_MS = 250;
/** Every mirrored workspace is looked at this often whatever inotify said. */
export const SAFETY_LOOK_MS = 5_000;
/** Loose branch files walked per workspace at most (past that, packed-refs and HEAD still count). */
const MAX_LOOSE_REFS = 10_000;
/** Folders under refs/heads given a watch of their own at most; past that the workspace is polled. */
const MAX_WATCHED_REF_DIRS = 64;
/** The entries of .git whose change moves a ref (a commit renames <ref>.lock over the ref). */
const GIT_DIR_NAMES = new Set(["HEAD", "HEAD.lock", "packed-refs", "packed-refs.lock"]);

/** What changes whenever a ref of the checkout moves: stat identities, no file contents. */
export function refsFingerprint(checkout: string): string {
  const git = join(checkout, ".git");
  const parts: string[] = [];
  const stamp = (path: string, name: string) => {
    const st = statSync(path, { bigint: true, throwIfNoEntry: false });
    parts.push(st ? `${name}:${st.ino}:${st.size}:${st.mtimeNs}` : `${name}:-`);
  };
  stamp(join(git, "HEAD"), "HEAD");
  stamp(join(git, "packed-refs"), "packed-refs");
  let budget = MAX_LOOSE_REFS;
  const walk = (dir: string, prefix: string) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      if (budget-- <= 0) return;
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path, `${prefix}${e.name}/`);
      else stamp(path, `${prefix}${e.name}`);
    }
  };
  walk(join(git, "refs", "heads"), "refs/heads/");
  return parts.join("\n");
}

/** The folders of refs/heads (itself first), or null past MAX_WATCHED_REF_DIRS. */
function refDirs(checkout: string): string[] | null {
  const dirs: string[] = [];
  const walk = (dir: string): boolean => {
    if (dirs.length >= MAX_WATCHED_REF_DIRS) return false;
    dirs.push(dir);
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return true;
    }
    return entries.every((e) => !e.isDirectory() || walk(join(dir, e.name)));
  };
  return walk(join(checkout, ".git", "refs", "heads")) ? dirs : null;
}

/**
 * inotify on what a workspace's refs moving touches. `dirty` is set by every event that may mean a
 * move (and starts set); a look clears it before it reads, so an event during the read is not lost.
 * The workspace folder's watch (its manifest) is kept for every workspace; the checkout's only for
 * one that is mirrored.
 */
class RefWatch {
  dirty = true;
  /** A folder appeared or went under refs/heads (or .git was replaced): the checkout's watches are set anew. */
  private rearm = true;
  /** Some watch is missing (not set up, failed, too many folders): looked at every tick. */
  private broken = false;
  private dir: FSWatcher | null = null;
  private checkout: FSWatcher[] = [];

  constructor(private readonly layout: WorkspaceLayout) {}

  /** Whether a look is due this tick. */
  due(): boolean {
    return this.dirty || this.broken || this.dir === null;
  }

  /** Before a look reads anything: the workspace folder's watch. */
  armFolder(): void {
    this.dirty = false;
    if (!this.dir) this.dir = this.add(this.layout.dir, () => true, false);
  }

  /** Before a mirrored workspace's refs are read: the checkout's watches, set anew when needed. */
  armCheckout(): void {
    if (!this.rearm && !this.broken) return;
    this.closeCheckout();
    this.rearm = false;
    const { checkout } = this.layout;
    const added = [
      this.add(checkout, (name) => name === ".git", true),
      this.add(join(checkout, ".git"), (name) => GIT_DIR_NAMES.has(name), false),
    ];
    const dirs = refDirs(checkout);
    for (const d of dirs ?? []) added.push(this.add(d, () => true, true));
    this.checkout = added.filter((w): w is FSWatcher => w !== null);
    this.broken = dirs === null || this.checkout.length !== added.length;
  }

  /** Not mirrored (any more): only the folder's watch stays. */
  closeCheckout(): void {
    for (const w of this.checkout) w.close();
    this.checkout = [];
    this.broken = false;
    this.rearm = true;
  }

  close(): void {
    this.closeCheckout();
    this.dir?.close();
    this.dir = null;
  }

  /** One watch; `relevant` filters by entry name; `structural` events (an entry came or went) re-arm. */
  private add(dir: string, relevant: (name: string) => boolean, structural: boolean): FSWatcher | null {
    try {
      const w = watch(dir, { persistent: false }, (event, name) => {
        if (name !== null && !relevant(String(name))) return;
        this.dirty = true;
        if (structural && event === "rename") this.rearm = true;
      });
      w.on("error", () => {
        w.close();
        if (w === this.dir) this.dir = null;
        else this.broken = true;
        this.rearm = true;
        this.dirty = true;
      });
      return w;
    } catch {
      return null;
    }
  }
}

interface Watched {
  manifestStamp: string;
  manifest: WorkspaceManifest | null;
  fingerprint: string | null;
  watch: RefWatch;
}

/** What a work state takes from the manifest (work-state.ts): a change there is reported even with the refs still. */
function workFields(m: WorkspaceManifest): string {
  return JSON.stringify([m.workspaceId, m.owner, m.commit, m.workHome ?? null]);
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

/** Watches every mirrored workspace of `root`, looking each `intervalMs` while `w.active()`; `stop()` ends it. */
export function watchWork(root: string, w: WorkWatcher, intervalMs = WORK_LOOK_INTERVAL_MS): { stop(): void; looks(): number } {
  let looks = 0;
  const seen = new Map<string, Watched>();
  const base = rootLayout(root).workspacesBase;
  /** The workspaces folder's own watch: a workspace came or went. */
  let baseWatch: FSWatcher | null = null;
  let baseDirty = true;
  let lastFull = 0;
  const forget = (key: string) => {
    const entry = seen.get(key);
    entry?.watch.close();
    seen.delete(key);
    const id = entry?.manifest?.workspaceId;
    if (id !== undefined) w.gone(id);
  };
  const armBase = () => {
    if (baseWatch || !existsSync(base)) return;
    try {
      baseWatch = watch(base, { persistent: false }, () => (baseDirty = true));
      baseWatch.on("error", () => {
        baseWatch?.close();
        baseWatch = null;
      });
    } catch {
      baseWatch = null;
    }
  };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const look = async () => {
    if (!w.active()) return;
    const now = Date.now();
    const full = now - lastFull >= SAFETY_LOOK_MS;
    if (full) lastFull = now;
    if (full || baseDirty || !baseWatch) {
      baseDirty = false;
      armBase();
      const names = existsSync(base) ? readdirSync(base).filter((n) => n.startsWith(WORKSPACE_PREFIX)) : [];
      const present = new Set(names);
      for (const key of [...seen.keys()]) if (!present.has(WORKSPACE_PREFIX + key)) forget(key);
      for (const name of names) {
        const key = name.slice(WORKSPACE_PREFIX.length);
        if (!seen.has(key)) {
          const layout = workspaceLayoutOfKey(root, key);
          seen.set(key, { manifestStamp: "", manifest: null, fingerprint: null, watch: new RefWatch(layout) });
        }
      }
    }
    for (const [key, entry] of [...seen]) {
      if (stopped) return;
      if (!full && !entry.watch.due()) continue;
      entry.watch.armFolder();
      const layout: WorkspaceLayout = workspaceLayoutOfKey(root, key);
      let manifestStamp = "";
      try {
        const st = statSync(layout.manifest, { bigint: true });
        manifestStamp = `${st.ino}:${st.mtimeNs}:${st.size}`;
      } catch {
        forget(key);
        continue;
      }
      if (entry.manifestStamp !== manifestStamp) {
        const manifest = readMirrored(layout.dir);
        if (entry.manifest && entry.manifest.workspaceId !== manifest?.workspaceId) {
          const id = entry.manifest.workspaceId;
          entry.manifest = null;
          w.gone(id);
        }
        // A pause or resume rewrites the manifest without touching what a work state says of it: no git then.
        const same = entry.manifest !== null && manifest !== null && workFields(entry.manifest) === workFields(manifest);
        Object.assign(entry, { manifestStamp, manifest, fingerprint: same ? entry.fingerprint : null });
      }
      if (!entry.manifest) {
        entry.watch.closeCheckout();
        continue;
      }
      entry.watch.armCheckout();
      looks++;
      const fingerprint = refsFingerprint(layout.checkout);
      if (fingerprint === entry.fingerprint) continue;
      try {
        const state = await readWorkState(layout, entry.manifest, false);
        entry.fingerprint = fingerprint;
        if (!stopped) w.moved(state);
      } catch {
        // Mid-removal, or a checkout git cannot read right now: looked at again next time.
        entry.watch.dirty = true;
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
    /** How many times a checkout's refs were read (the cost an idle workspace should not have). */
    looks: () => looks,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      baseWatch?.close();
      for (const entry of seen.values()) entry.watch.close();
    },
  };
}
