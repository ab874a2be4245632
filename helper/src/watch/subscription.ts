// One watch subscription (docs/contract.md#helper-watch): its OS watchers, its per-path 50 ms trailing debounce
// and its ignored paths. Every `changed` line carries exactly one path.
import { type FSWatcher, lstatSync, type Stats, watch } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { basename, dirname, join, posix, relative } from "node:path";
import { errorMessage } from "../output.js";
import { isMissingError, normalizeRelative, resolveScoped } from "../scope.js";

export const DEBOUNCE_MS = 50;
const SCAN_CONCURRENCY = 32;

export type WatchEvent =
  { type: "changed"; subscriptionId: unknown; paths: [string] } | { type: "error"; subscriptionId: unknown; message: string };

// fs-write's temp files (`.<name>.paseo-<uuid>.tmp`) are an implementation detail: no listing
// or event may show them.
const TEMP_NAME = /^\..*\.paseo-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$/;

/**
 * On Linux, libuv names an event on the watched directory itself (attributes changed, deleted)
 * after that directory's basename instead of giving no filename. Such an event is told apart
 * from a same-named child by the child's absence.
 */
function isSelfEvent(directory: string, filename: string): boolean {
  return filename === basename(directory) && lstatOrUndefined(join(directory, filename)) === undefined;
}

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (err) {
    if (isMissingError(err)) return undefined;
    throw err;
  }
}

function isDirectory(path: string): boolean {
  return lstatOrUndefined(path)?.isDirectory() === true;
}

// Compared against normalised reported paths, so `./build/` must match `build`.
function normalizeIgnored(path: string): string {
  return posix.normalize(path).replace(/(.)\/+$/, "$1");
}

interface SubscribeOptions {
  id: unknown;
  paths: unknown;
  recursive: boolean;
  ignoredPaths: unknown;
}

export class Subscription {
  private readonly watchers: FSWatcher[] = [];
  /** Level watchers by directory, so a directory is watched once and stale ones can be dropped. */
  private readonly levelWatchers = new Map<string, FSWatcher>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly ignored: string[];
  private closed = false;

  private constructor(
    private readonly root: string,
    private readonly id: unknown,
    ignoredPaths: string[],
    private readonly emit: (event: WatchEvent) => void,
  ) {
    this.ignored = ignoredPaths;
  }

  /**
   * Sets up every path before resolving, so the caller acknowledges only a fully armed
   * subscription. Escaping paths and unresolvable parents throw (fatal for the session).
   */
  static async open(root: string, options: SubscribeOptions, emit: (event: WatchEvent) => void): Promise<Subscription> {
    const ignoredPaths = options.ignoredPaths ?? [];
    if (!Array.isArray(ignoredPaths)) throw new Error("command.ignoredPaths is not iterable");
    if (!Array.isArray(options.paths)) throw new Error("command.paths is not iterable");
    const subscription = new Subscription(
      root,
      options.id,
      ignoredPaths.map((p) => normalizeIgnored(String(p))),
      emit,
    );
    try {
      for (const path of options.paths as unknown[]) {
        if (typeof path !== "string") throw new Error("Watch paths must be strings");
        await subscription.add(path, options.recursive);
      }
    } catch (err) {
      subscription.close();
      throw err;
    }
    return subscription;
  }

  close(): void {
    this.closed = true;
    for (const watcher of this.watchers.splice(0)) watcher.close();
    this.levelWatchers.clear();
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  private async add(path: string, recursive: boolean): Promise<void> {
    const scoped = await resolveScoped(this.root, path);
    const stats = await stat(scoped.absolute).catch((err: unknown) => {
      if (isMissingError(err)) return undefined;
      throw err;
    });
    if (stats?.isDirectory() && recursive) {
      await this.watchTree(scoped.absolute);
    } else if (scoped.relative === ".") {
      // Our choice for the open point of docs/contract.md#helper-watch: a non-recursive `.` watches the root's own
      // entries (one level) instead of the root's parent, which lies outside the workspace.
      this.watchLevel(scoped.absolute, { rescan: false });
    } else {
      this.watchEntry(scoped.absolute, scoped.relative);
    }
  }

  /** A file, missing path or non-recursive directory: its parent, filtered to its basename. */
  private watchEntry(absolute: string, reported: string): void {
    const name = basename(absolute);
    this.watchDirectory(dirname(absolute), (filename) => {
      if ((filename === null || filename === name) && !this.isIgnored(reported)) this.schedule(reported, undefined);
    });
  }

  private isIgnored(reported: string): boolean {
    return this.ignored.some((ignored) => reported === ignored || reported.startsWith(`${ignored}/`));
  }

  /** One directory level: events name its entries; `rescan` adds new sub-directories. */
  private watchLevel(directory: string, { rescan }: { rescan: boolean }): void {
    const watcher = this.watchDirectory(directory, (filename, event) => {
      let target = filename;
      if (filename !== null && isSelfEvent(directory, filename)) {
        target = null;
        if (event === "rename") this.rearm(directory);
      }
      if (target !== null && TEMP_NAME.test(target)) return;
      const reported = normalizeRelative(relative(this.root, target === null ? directory : join(directory, target)));
      if (!this.isIgnored(reported)) this.schedule(reported, rescan ? directory : undefined);
    });
    if (watcher !== undefined) this.levelWatchers.set(directory, watcher);
  }

  // A self `rename` is a move or deletion of the directory (IN_MOVE_SELF, IN_DELETE_SELF,
  // IN_IGNORED), so its OS watch is dead or stale; inode numbers are reused and cannot tell.
  // The watch is rebuilt if a directory is at that path again (deleted and re-created, or a
  // same-named child that looked like a self event); otherwise the parent's rescan picks up a
  // later re-creation.
  private rearm(directory: string): void {
    this.levelWatchers.get(directory)?.close();
    this.levelWatchers.delete(directory);
    if (isDirectory(directory)) void this.watchTree(directory);
  }

  /**
   * Watches a tree breadth-first, reading up to SCAN_CONCURRENCY directories at once: the whole
   * tree must be armed before `subscribed`, and Paseo waits only 3 s for it.
   */
  private async watchTree(start: string): Promise<void> {
    let level = [start];
    while (level.length > 0 && !this.closed) {
      const next: string[] = [];
      for (let i = 0; i < level.length; i += SCAN_CONCURRENCY) {
        const batch = level.slice(i, i + SCAN_CONCURRENCY).filter((directory) => this.startLevel(directory));
        for (const children of await Promise.all(batch.map((directory) => this.childDirectories(directory)))) {
          next.push(...children);
        }
      }
      level = next;
    }
  }

  /** Watches one tree directory unless it is already watched or ignored. */
  private startLevel(directory: string): boolean {
    if (this.closed || this.levelWatchers.has(directory)) return false;
    if (this.isIgnored(normalizeRelative(relative(this.root, directory)))) return false;
    this.watchLevel(directory, { rescan: true });
    return true;
  }

  // Dirent.isDirectory() is false for symlinks, so symlinked directories are never followed.
  // An unreadable directory is reported as an `error` event; the rest of the tree is watched.
  private async childDirectories(directory: string): Promise<string[]> {
    try {
      const entries = await readdir(directory, { withFileTypes: true });
      return entries.filter((entry) => entry.isDirectory()).map((entry) => join(directory, entry.name));
    } catch (err) {
      if (!isMissingError(err)) this.reportError(err);
      return [];
    }
  }

  /** After an event in a watched tree directory: arm sub-directories that appeared since. */
  private async rescan(directory: string): Promise<void> {
    for (const child of await this.childDirectories(directory)) {
      if (!this.levelWatchers.has(child)) await this.watchTree(child);
    }
  }

  private watchDirectory(directory: string, onEvent: (filename: string | null, event: string) => void): FSWatcher | undefined {
    try {
      const watcher = watch(directory, { persistent: true }, (event, filename) => {
        if (this.closed) return;
        try {
          onEvent(filename === null || filename === undefined ? null : String(filename), event);
        } catch (err) {
          this.reportError(err);
        }
      });
      watcher.on("error", (err) => this.reportError(err));
      this.watchers.push(watcher);
      return watcher;
    } catch (err) {
      // A directory that vanished meanwhile is covered by its parent's events; anything else
      // (e.g. inotify limits, ENOSPC) is reported and the session keeps running.
      if (!isMissingError(err)) this.reportError(err);
      return undefined;
    }
  }

  private reportError(err: unknown): void {
    if (!this.closed) this.emit({ type: "error", subscriptionId: this.id, message: errorMessage(err) });
  }

  /**
   * Trailing debounce per reported path. A tree directory that produced the event is rescanned
   * before `changed` is printed, so a client reacting to `changed ["newdir"]` finds it watched.
   */
  private schedule(reported: string, rescanDirectory: string | undefined): void {
    const pending = this.timers.get(reported);
    if (pending !== undefined) clearTimeout(pending);
    const timer = setTimeout(() => {
      this.timers.delete(reported);
      void this.fire(reported, rescanDirectory);
    }, DEBOUNCE_MS);
    this.timers.set(reported, timer);
  }

  private async fire(reported: string, rescanDirectory: string | undefined): Promise<void> {
    if (rescanDirectory !== undefined) await this.rescan(rescanDirectory);
    if (!this.closed) this.emit({ type: "changed", subscriptionId: this.id, paths: [reported] });
  }
}
