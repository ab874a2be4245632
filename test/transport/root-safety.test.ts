// The remote root is ours before anything under it runs: another local user of the host (the rig's
// second account) must not be able to get their code run as the SSH user by planting an
// `agent.cjs` at its public path, and reconcile never deletes by name in a directory that is not a
// root of ours (the marker). The host is this machine, so the test plants state directly: as root
// for the rig's login user and for another user (the rig's second login user, or `nobody` where
// the rig has none: the embedded server); otherwise as the current user, who is the login user,
// and the cases that give a directory to another user are skipped (only root can chown).
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { agentBundle } from "../../src/transport/bootstrap.js";
import { ROOT_MARKER } from "../../src/remote-agent/root-marker.js";
import { rig, rigOptions } from "../rig/rig.js";
import { lifecycleRequest, runCli } from "../support/run-cli.js";
import { needs, skipUnless, unless } from "../support/needs.js";
import type { Options } from "../../src/contract/index.js";

const uidOf = (user: string) => Number(execFileSync("id", ["-u", user]).toString().trim());

const bases = suite("all");

/**
 * A directory of `uid` (mode `mode`) whose parents all pass StrictModes: as root, under a
 * root-owned 0755 directory in /srv (the run's TMPDIR is root's own, which the login user cannot
 * enter); otherwise in the home directory (the run's TMPDIR is sticky and world-writable but not
 * root's), and the login user's (only root can give it away).
 */
function closedParent(uid: number, mode: number): string {
  const asRoot = process.getuid?.() === 0;
  const base = bases.tmp(asRoot ? "/srv/paseo-root-safety-" : join(homedir(), ".paseo-root-safety-"));
  chmodSync(base, 0o755);
  const dir = join(base, "p");
  dirOf(dir, asRoot ? uid : process.getuid!(), mode);
  return dir;
}

/** Another local user of the host: the rig's second login user, else `nobody` (any account will do). */
const otherUser = () => rig().noisyUser ?? "nobody";

/** Gives `path` to `uid` (root only; a non-root run creates everything as the login user already). */
function own(path: string, uid: number, recursive = false): void {
  if (uid === process.getuid?.()) return;
  if (recursive) execFileSync("chown", ["-R", `${uid}:${uid}`, path]);
  else chownSync(path, uid, uid);
}

function dirOf(path: string, uid: number, mode: number): void {
  mkdirSync(path, { recursive: true });
  own(path, uid);
  chmodSync(path, mode);
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function inspect(root: string) {
  const options = rigOptions({ root }) as Options;
  return runCli(["inspect", "--workspace-id", "root-safety"], { stdin: lifecycleRequest(options), timeoutMs: 60_000 });
}

function reconcile(root: string) {
  const options = rigOptions({ root }) as Options;
  return runCli(["reconcile"], { stdin: lifecycleRequest(options, { workspaceIds: [] }), timeoutMs: 60_000 });
}

describe("remote root safety", unless(needs.localHost("plants files on the host directly")), () => {
  const hash = agentBundle().hash;

  /** Plants an agent that leaves a proof file when run, in the layout the cases below describe. */
  function plant(parent: string, owners: { root: [number, number]; agent: [number, number]; hashDir: [number, number] }): string {
    const root = join(parent, "root");
    dirOf(root, ...owners.root);
    dirOf(join(root, "agent"), ...owners.agent);
    dirOf(join(root, "agent", hash), ...owners.hashDir);
    const agent = join(root, "agent", hash, "agent.cjs");
    writeFileSync(agent, `require("fs").writeFileSync(${JSON.stringify(join(parent, "pwned"))}, String(process.getuid()));\n`);
    own(agent, owners.hashDir[0]);
    chmodSync(agent, 0o755);
    return root;
  }

  // [case, whether it gives something to another user, layout, offending path, its mode]
  const cases: Array<[string, boolean, (me: number, other: number) => Parameters<typeof plant>[1], (root: string) => string, RegExp]> = [
    [
      "the root belongs to another user",
      true,
      (me, other) => ({ root: [other, 0o755], agent: [other, 0o755], hashDir: [other, 0o755] }),
      (r) => r,
      /^drwxr-xr-x$/,
    ],
    [
      "the root is world-writable",
      true,
      (me, other) => ({ root: [me, 0o777], agent: [other, 0o755], hashDir: [other, 0o755] }),
      (r) => r,
      /^drwxrwxrwx$/,
    ],
    [
      "agent/ belongs to another user",
      true,
      (me, other) => ({ root: [me, 0o700], agent: [other, 0o755], hashDir: [other, 0o755] }),
      (r) => join(r, "agent"),
      /^drwxr-xr-x$/,
    ],
    [
      "the agent's directory is group-writable",
      false,
      (me) => ({ root: [me, 0o700], agent: [me, 0o700], hashDir: [me, 0o770] }),
      (r) => join(r, "agent", hash),
      /^drwxrwx---$/,
    ],
  ];

  it.for(cases)(
    "a planted agent is never run when %s: one ownership error names the path, owner and mode",
    async ([, givesAway, layout, offender, mode], ctx) => {
      if (givesAway) skipUnless(ctx, needs.root("gives a directory to another local user (chown)"));
      const me = uidOf(rig().user);
      const other = givesAway ? uidOf(otherUser()) : me;
      const parent = closedParent(0, 0o755);
      const root = plant(parent, layout(me, other));
      const r = await inspect(root);
      expect(existsSync(join(parent, "pwned"))).toBe(false);
      expect(r.code).toBe(7);
      const line = r.stderr.trim();
      expect(line.split("\n")).toHaveLength(1);
      const m = new RegExp(
        `^remote root directory (.*) on \\S+ is owned by (\\S+) with mode (\\S+); the root, its agent/ and agent/[0-9a-f]{16}/ must belong to ${escapeRegExp(rig().user)} and not be writable by group or others: fix that or choose another root$`,
      ).exec(line);
      expect(m, line).not.toBeNull();
      expect(m![1]).toBe(offender(root));
      expect(m![3]).toMatch(mode);
      expect(m![2]).toBe(statSync(offender(root)).uid === me ? rig().user : otherUser());
    },
  );

  it("a root created by the runtime is 0700 down to the agent, marked, and works", async () => {
    const root = join(closedParent(uidOf(rig().user), 0o755), "fresh", "root");
    const r = await inspect(root);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    for (const p of [root, join(root, "agent"), join(root, "agent", hash)]) {
      expect(statSync(p).mode & 0o777).toBe(0o700);
      expect(statSync(p).uid).toBe(uidOf(rig().user));
    }
    expect(existsSync(join(root, ROOT_MARKER))).toBe(true);
  });

  it.for([
    ["another user's world-writable directory", (other: number) => [other, 0o777], "drwxrwxrwx"],
    ["another user's sticky world-writable directory", (other: number) => [other, 0o1777], "drwxrwxrwt"],
    ["a group-writable directory of root", () => [0, 0o775], "drwxrwxr-x"],
  ] as Array<[string, (other: number) => [number, number], string]>)(
    "a root below %s is refused before anything is created or run there",
    async ([, owner, mode], ctx) => {
      skipUnless(ctx, needs.root("gives a directory to another local user (chown)"));
      const other = uidOf(otherUser());
      const [uid, bits] = owner(other);
      const shared = closedParent(uid, bits);
      const root = join(shared, "r");
      const r = await inspect(root);
      expect(r.code, r.stderr).toBe(7);
      const user = rig().user;
      expect(r.stderr).toBe(
        `directory ${shared} above the remote root on ${user}@${rig().host}:${rig().port} is owned by ${uid === 0 ? "root" : otherUser()} with mode ${mode}; every directory above the root (up to ${user}'s home) must belong to root or ${user} and not be writable by group or others, as OpenSSH's StrictModes requires, or whoever can write it could replace the root: fix that or choose another root\n`,
      );
      expect(readdirSync(shared)).toEqual([]);
    },
  );

  it("a root right below /tmp (sticky, world-writable, root's) is accepted: nobody else can rename it away", async () => {
    expect(statSync("/tmp").uid).toBe(0);
    expect(statSync("/tmp").mode & 0o1777).toBe(0o1777);
    const root = bases.tmp("/tmp/paseo-root-safety-");
    rmSync(root, { recursive: true });
    const r = await inspect(root);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(statSync(root).uid).toBe(uidOf(rig().user));
    expect(statSync(root).mode & 0o777).toBe(0o700);
  });

  /** Old cache and trash entries, as reconcile would prune them in a root of ours. */
  function prunable(root: string): string[] {
    const me = uidOf(rig().user);
    const cache = join(root, "cache", "0123456789abcdef.git");
    const trash = join(root, "tmp", "trash-planted");
    for (const p of [cache, trash]) {
      mkdirSync(p, { recursive: true });
      writeFileSync(join(p, "keep"), "user data\n");
    }
    own(root, me, true);
    const old = new Date(Date.now() - 3600_000);
    for (const p of [cache, trash]) utimesSync(p, old, old);
    return [cache, trash];
  }

  it("reconcile touches nothing in a pre-existing directory that holds other files (no marker)", async () => {
    const me = uidOf(rig().user);
    const root = join(closedParent(0, 0o755), "home-like");
    dirOf(root, me, 0o700);
    writeFileSync(join(root, "notes.txt"), "mine\n");
    const kept = prunable(root);
    const r = await reconcile(root);
    expect(r.code).toBe(7);
    expect(r.stderr.trim()).toBe(
      `remote root ${root} holds files paseo-ssh-runtime did not create (no ${ROOT_MARKER} marker), so reconcile left it untouched; give the runtime a directory of its own as root`,
    );
    for (const p of kept) expect(readFileSync(join(p, "keep"), "utf8")).toBe("user data\n");
    expect(existsSync(join(root, ROOT_MARKER))).toBe(false);
  });

  it("a root of an earlier version (our layout, no marker) is marked on first use and reconciled", async () => {
    const me = uidOf(rig().user);
    const root = join(closedParent(0, 0o755), "earlier");
    dirOf(root, me, 0o700);
    dirOf(join(root, "workspaces"), me, 0o700);
    const [cache, trash] = prunable(root);
    const r = await reconcile(root);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(existsSync(join(root, ROOT_MARKER))).toBe(true);
    expect(existsSync(cache!)).toBe(false);
    // Trash is judged by when it was moved there (its ctime, which a backdated mtime does not
    // change): under a minute ago, so a deleter may still be at work on it and it stays.
    expect(existsSync(trash!)).toBe(true);
  });
});
