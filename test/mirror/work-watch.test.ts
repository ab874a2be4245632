// The host daemon's watch of workspaces' refs (src/remote-agent/workspace/work-watch.ts) on a real
// filesystem with real git: inotify says which workspace to look at, so a commit is seen within a
// tick or two while idle workspaces are not read at all between the safety looks, and a workspace
// that comes, moves a nested branch, detaches HEAD or goes is reported as such.
import { beforeEach, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SAFETY_LOOK_MS, watchWork } from "../../src/remote-agent/workspace/work-watch.js";
import { rootLayout, workspaceKey, WORKSPACE_PREFIX } from "../../src/remote-agent/layout.js";
import { MANIFEST_MARKER } from "../../src/remote-agent/workspace/manifest.js";
import type { WorkState } from "../../src/shared/agent-api.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=A", "-c", "user.email=a@example.com", ...args], { cwd, encoding: "utf8" }).trim();

const s = suite();
let root: string;
beforeEach(() => {
  root = s.tmp("work-watch-");
});

/** A ready, mirrored workspace with a one-commit checkout on main. */
function workspace(id: string): string {
  const dir = join(rootLayout(root).workspacesBase, WORKSPACE_PREFIX + workspaceKey(id));
  const checkout = join(dir, "checkout");
  mkdirSync(checkout, { recursive: true });
  git(checkout, "init", "-q", "-b", "main");
  git(checkout, "commit", "-q", "--allow-empty", "-m", "base");
  const now = new Date().toISOString();
  const manifest = {
    marker: MANIFEST_MARKER,
    workspaceId: id,
    owner: "test",
    phase: "ready",
    branch: "main",
    commit: git(checkout, "rev-parse", "HEAD"),
    workspaceRoot: checkout,
    projectKey: null,
    lifecycleEnvironment: {},
    workHome: { gitDir: "/nowhere/.git", seal: "0".repeat(64) },
    createdAt: now,
    updatedAt: now,
  };
  writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest));
  return checkout;
}

function watcher() {
  const moved: WorkState[] = [];
  const gone: string[] = [];
  const h = watchWork(root, { moved: (s) => moved.push(s), gone: (id) => gone.push(id), active: () => true });
  const until = async (what: string, ok: () => boolean, ms = 2_000) => {
    const start = Date.now();
    while (!ok()) {
      if (Date.now() - start > ms) throw new Error(`not within ${ms} ms: ${what}`);
      await sleep(20);
    }
    return Date.now() - start;
  };
  const last = (id: string) => moved.filter((s) => s.workspaceId === id).at(-1);
  return { h, moved, gone, until, last };
}

describe("the host's watch of workspaces' refs", () => {
  it("reports a new nested branch, its next commit, a detached HEAD and packed refs within a second each", async () => {
    const co = workspace("ws-a");
    const w = watcher();
    try {
      await w.until("the first look", () => w.last("ws-a") !== undefined);
      git(co, "switch", "-q", "-c", "agent/deep/feature");
      git(co, "commit", "-q", "--allow-empty", "-m", "one");
      const one = git(co, "rev-parse", "HEAD");
      await w.until(
        "the new branch",
        () => w.last("ws-a")?.branches.some((b) => b.name === "agent/deep/feature" && b.commit === one) === true,
        1_000,
      );
      git(co, "commit", "-q", "--allow-empty", "-m", "two");
      const two = git(co, "rev-parse", "HEAD");
      await w.until("its next commit", () => w.last("ws-a")?.head === two, 1_000);
      git(co, "switch", "-q", "--detach", "HEAD~1");
      await w.until("the detached HEAD", () => w.last("ws-a")?.headRef === null && w.last("ws-a")?.head === one, 1_000);
      git(co, "pack-refs", "--all");
      git(co, "update-ref", "refs/heads/main", two);
      await w.until("a packed ref moved", () => w.last("ws-a")?.branches.find((b) => b.name === "main")?.commit === two, 1_000);
    } finally {
      w.h.stop();
    }
  });

  it("idle workspaces are not read between safety looks; a workspace that comes is reported, one that goes is gone", async () => {
    for (const id of ["ws-1", "ws-2", "ws-3"]) workspace(id);
    const w = watcher();
    try {
      await w.until("the first look", () => ["ws-1", "ws-2", "ws-3"].every((id) => w.last(id)));
      await sleep(300);
      const before = w.h.looks();
      // Polling every 250 ms would read each of the three about 8 times in 2 s; a safety look reads each once.
      await sleep(2_000);
      expect(w.h.looks() - before).toBeLessThanOrEqual(3);
      expect(SAFETY_LOOK_MS).toBeGreaterThan(2_000);
      const co = workspace("ws-4");
      await w.until("a new workspace", () => w.last("ws-4") !== undefined, 1_000);
      git(co, "commit", "-q", "--allow-empty", "-m", "x");
      const x = git(co, "rev-parse", "HEAD");
      await w.until("its commit", () => w.last("ws-4")?.head === x, 1_000);
      rmSync(join(co, ".."), { recursive: true, force: true });
      await w.until("its removal", () => w.gone.includes("ws-4"), 1_000);
    } finally {
      w.h.stop();
    }
  });

  it("a manifest rewritten by pause is no news; one whose work home changed is reported again", async () => {
    const co = workspace("ws-p");
    const w = watcher();
    try {
      await w.until("the first look", () => w.last("ws-p") !== undefined);
      const file = join(co, "..", "manifest.json");
      const m = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
      const reports = () => w.moved.filter((s) => s.workspaceId === "ws-p").length;
      const before = reports();
      writeFileSync(file, JSON.stringify({ ...m, phase: "paused", updatedAt: new Date().toISOString() }));
      await sleep(1_000);
      expect(reports()).toBe(before);
      writeFileSync(file, JSON.stringify({ ...m, workHome: { gitDir: "/elsewhere/.git", seal: "1".repeat(64) } }));
      await w.until("the new work home", () => w.last("ws-p")?.workHome?.gitDir === "/elsewhere/.git", 1_000);
    } finally {
      w.h.stop();
    }
  });

  it("a .git replaced under a watched checkout is still followed", async () => {
    const co = workspace("ws-r");
    const w = watcher();
    try {
      await w.until("the first look", () => w.last("ws-r") !== undefined);
      rmSync(join(co, ".git"), { recursive: true, force: true });
      git(co, "init", "-q", "-b", "other");
      git(co, "commit", "-q", "--allow-empty", "-m", "fresh");
      const fresh = git(co, "rev-parse", "HEAD");
      await w.until("the new .git's commit", () => w.last("ws-r")?.head === fresh, 1_500);
      git(co, "commit", "-q", "--allow-empty", "-m", "again");
      const again = git(co, "rev-parse", "HEAD");
      await w.until("a commit in the new .git", () => w.last("ws-r")?.head === again, 1_000);
    } finally {
      w.h.stop();
    }
  });
});
