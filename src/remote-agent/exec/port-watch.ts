// The TCP ports a workspace's own processes listen on, published as notices of kind "ports" (key:
// the workspace id; docs/architecture.md "Notices") so the broker forwards them to the Paseo side.
// Looked at only while some workspace has a live exec, and then cheaply: each tick reads
// /proc/net/tcp{,6} once for the whole daemon (this user's listening sockets only), and only a
// socket not seen before is traced to a process, by walking the live workspaces' process sets
// (process-set.ts, the same membership pause uses) and their descriptors. A socket held by no
// workspace process (another program of this login user) is remembered as nobody's for a while, so
// it costs no walk every tick. A paused workspace publishes nothing (its forwards end). A port a live
// exec's env names for Paseo's services (named-ports.ts) is marked `named`, and while one is not
// listening yet the watch looks five times as often (for the exec's first 30 s), so a service
// preview answers at once.
import { basename } from "node:path";
import { readArgv } from "../../shared/proc-stat.js";
import type { PortEntry as WirePortEntry } from "../../shared/agent-api.js";
import { noticeBoard } from "../notice-board.js";
import { listeners, socketInodes, type ListenAddress } from "../proc/listening.js";
import { workspaceMembers } from "../proc/process-set.js";
import { execSupervisors } from "./sessions.js";
import type { WorkspaceLayout } from "../layout.js";

/**
 * Detection latency is at most this plus the broker's listen, within the 1 s promised. A tick costs
 * ~0.4 ms of CPU here (the kernel generating /proc/net/tcp{,6}), whatever the number of workspaces.
 */
const PORT_TICK_MS = 500;
/**
 * While a port a live exec's env names (named-ports.ts) does not listen yet, ticks come this often,
 * for the exec's first NAMED_FAST_FOR_MS only: an exec that names a port it never opens (a terminal
 * with PASEO_WORKTREE_PORT) must not keep the daemon at five times its cost.
 */
const NAMED_TICK_MS = 100;
const NAMED_FAST_FOR_MS = 30_000;
/** A listening socket no workspace process held is looked at again after this long. */
const NOBODY_RETRY_MS = 2000;

/** A port as published (agent-api.ts PortEntry), with the addresses it listens on. */
type PortEntry = WirePortEntry & { addresses: ListenAddress[] };

interface Owner {
  workspaceId: string;
  pid: number;
  argv0: string;
  since: number;
}

class PortWatch {
  private timer: NodeJS.Timeout | null = null;
  /** Some live exec names a port that no workspace process listens on yet. */
  private namedPending = false;
  /** Socket inode → the workspace process holding it, or null (nobody's) with when to look again. */
  private readonly owners = new Map<string, Owner | { nobodyUntil: number }>();
  /** Workspaces with ports published, and what was published. */
  private readonly published = new Map<string, string>();
  private readonly paused = new Set<string>();
  private readonly uid = process.getuid?.() ?? -1;

  /** Starts watching (Linux; elsewhere ports are not detected and doctor says so). */
  enable(): void {
    if (process.platform !== "linux") return;
    execSupervisors.onAdd = () => this.ensure();
    this.ensure();
  }

  /** Pause stops a workspace's forwards at once; resume brings them back. */
  setPaused(workspaceId: string, paused: boolean): void {
    if (paused) this.paused.add(workspaceId);
    else this.paused.delete(workspaceId);
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
      if (this.tick()) this.schedule();
    }
  }

  private ensure(): void {
    if (this.timer) return;
    this.schedule();
  }

  private schedule(): void {
    this.timer = setTimeout(
      () => {
        this.timer = null;
        if (this.tick()) this.schedule();
      },
      this.namedPending ? NAMED_TICK_MS : PORT_TICK_MS,
    );
    this.timer.unref();
  }

  /** One look; false when the watch stopped (no live exec left). */
  private tick(): boolean {
    const live = execSupervisors.workspaces();
    for (const id of this.paused) live.delete(id);
    if (live.size === 0) {
      this.publishAll(new Map());
      this.namedPending = false;
      if (execSupervisors.size === 0) {
        if (this.timer) clearTimeout(this.timer);
        this.timer = null;
        this.owners.clear();
        return false;
      }
      return true;
    }
    const now = Date.now();
    const socks = listeners(this.uid);
    const present = new Set(socks.map((l) => l.inode));
    for (const inode of this.owners.keys()) if (!present.has(inode)) this.owners.delete(inode);
    const fresh = new Set<string>();
    for (const l of socks) {
      const o = this.owners.get(l.inode);
      if (!o || ("nobodyUntil" in o && o.nobodyUntil <= now)) fresh.add(l.inode);
    }
    if (fresh.size > 0) this.trace(fresh, live, now);
    const byWorkspace = new Map<string, Map<number, PortEntry>>();
    for (const l of socks) {
      const o = this.owners.get(l.inode);
      if (!o || "nobodyUntil" in o || !live.has(o.workspaceId)) continue;
      let ports = byWorkspace.get(o.workspaceId);
      if (!ports) byWorkspace.set(o.workspaceId, (ports = new Map()));
      const e = ports.get(l.port);
      if (e) {
        if (!e.addresses.includes(l.address)) e.addresses.push(l.address);
        e.since = Math.min(e.since, o.since);
      } else ports.set(l.port, { port: l.port, addresses: [l.address], pid: o.pid, argv0: o.argv0, since: o.since });
    }
    const named = execSupervisors.namedPorts();
    this.namedPending = false;
    for (const [id, wanted] of named) {
      if (!live.has(id)) continue;
      const ports = byWorkspace.get(id);
      for (const [port, startedAt] of wanted) {
        const e = ports?.get(port);
        if (e) e.named = true;
        else if (now - startedAt < NAMED_FAST_FOR_MS) this.namedPending = true;
      }
    }
    this.publishAll(byWorkspace);
    return true;
  }

  /** Finds which workspace process holds each socket in `fresh`. */
  private trace(fresh: Set<string>, live: Map<string, WorkspaceLayout>, now: number): void {
    for (const [workspaceId, layout] of live) {
      for (const m of workspaceMembers(layout)) {
        for (const inode of socketInodes(m.pid)) {
          if (!fresh.has(inode)) continue;
          fresh.delete(inode);
          this.owners.set(inode, { workspaceId, pid: m.pid, argv0: basename(m.argv[0] ?? readArgv(m.pid)[0] ?? "?"), since: now });
        }
        if (fresh.size === 0) return;
      }
    }
    for (const inode of fresh) this.owners.set(inode, { nobodyUntil: now + NOBODY_RETRY_MS });
  }

  private publishAll(byWorkspace: Map<string, Map<number, PortEntry>>): void {
    for (const id of [...this.published.keys()]) {
      if (byWorkspace.has(id)) continue;
      this.published.delete(id);
      noticeBoard.publish("ports", id, null);
    }
    for (const [id, ports] of byWorkspace) {
      const list = [...ports.values()].sort((a, b) => a.port - b.port);
      for (const p of list) p.addresses.sort();
      const text = JSON.stringify(list);
      if (this.published.get(id) === text) continue;
      this.published.set(id, text);
      noticeBoard.publish("ports", id, { ports: list });
    }
  }
}

export const portWatch = new PortWatch();
