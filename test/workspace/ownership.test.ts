// Ownership, races, partial state and reconciliation (docs/contract.md#scenarios J1, K1, L1,
// L2, M1, N1, P1, S9) over the real sshd. Foreign state is planted directly on the host (the
// "remote" is this machine) and must survive every refused operation byte for byte.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync, chmodSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { MANIFEST_MARKER } from "../../src/remote-agent/workspace/manifest.js";
import { seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { dirInput, OTHER_OWNER, OWNER, cliDriver, startCli, type Driver, removeRoot } from "../support/workspace.js";
import { lifecycleRequest, runCli } from "../support/run-cli.js";
import { releaseWorkspaceHooks, setWorkspaceHooks } from "../support/test-hooks.js";
import { TEST_HOOKS_FILE } from "../../src/remote-agent/test-hooks.js";
import { onHost } from "../support/host-view.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function snapshot(dir: string): string {
  return (
    execFileSync("find", [onHost(dir), "-printf", "%p %s %m\\n"])
      .toString()
      .split("\n")
      .sort()
      .join("\n") + readFileSync(onHost(join(dir, "manifest.json")), "utf8")
  );
}

function remoteUid(root: string): { uid: number; gid: number } {
  const st = execFileSync("stat", ["-c", "%u %g", onHost(root)])
    .toString()
    .trim()
    .split(" ")
    .map(Number);
  return { uid: st[0]!, gid: st[1]! };
}

/** Plants `<dir>` for `workspaceId` with the given manifest text (null = no manifest, a sentinel only). */
function plant(root: string, workspaceId: string, manifest: string | null): string {
  const { dir } = workspaceLayout(root, workspaceId);
  // Only what this creates is handed to the host user: the rest of the root is the daemon's, and
  // its spare builds come and go under it (a chown of the whole root raced a vanishing HEAD.lock).
  const created = mkdirSync(onHost(dir), { recursive: true }) ?? onHost(dir);
  writeFileSync(onHost(join(dir, "sentinel")), "foreign\n");
  if (manifest !== null) writeFileSync(onHost(join(dir, "manifest.json")), manifest);
  const { uid, gid } = remoteUid(root);
  execFileSync("chown", ["-R", `${uid}:${gid}`, created]);
  return dir;
}

function manifestFor(workspaceId: string, owner: string, phase = "ready", extra: Record<string, unknown> = {}): string {
  const now = new Date().toISOString();
  return JSON.stringify({
    marker: MANIFEST_MARKER,
    workspaceId,
    owner,
    phase,
    branch: "main",
    commit: "",
    workspaceRoot: "/nonexistent",
    projectKey: null,
    lifecycleEnvironment: {},
    createdAt: now,
    updatedAt: now,
    ...extra,
  });
}

describe("ownership, partial state and reconciliation over SSH", () => {
  const s = suite("all");
  let base: string;
  let fixture: FixtureRepo;
  let d: Driver;

  beforeAll(async () => {
    base = s.tmp("paseo-ws-own-");
    fixture = seedRepo(base);
    d = cliDriver("own");
    s.push(() => removeRoot(d.root));
    // Creates the root (owned by the remote user) so planted state can sit beside real workspaces.
    expect((await d.create(dirInput("own-real", fixture.path))).message).toBe("");
  });

  it("J1: a directory without a manifest is refused by create, inspect and destroy, and survives", async () => {
    const dir = plant(d.root, "own-j1", null);
    const before = execFileSync("find", [onHost(dir)]).toString();
    for (const r of [await d.create(dirInput("own-j1", fixture.path)), await d.inspect("own-j1"), await d.op("destroy", "own-j1")]) {
      expect(r.ok).toBe(false);
      expect(r.message).toBe(`SSH workspace ownership mismatch: ${dir}`);
      expect(r.exitCode).toBe(7);
      expect(r.stdout).toBe("");
    }
    expect(execFileSync("find", [onHost(dir)]).toString()).toBe(before);
    expect(readFileSync(onHost(join(dir, "sentinel")), "utf8")).toBe("foreign\n");
  });

  it("K1: another runtime instance is refused on every operation and changes nothing", async () => {
    const { dir } = workspaceLayout(d.root, "own-real");
    const before = snapshot(dir);
    const calls = [
      d.inspect("own-real", { owner: OTHER_OWNER }),
      d.create(dirInput("own-real", fixture.path), { owner: OTHER_OWNER }),
      d.op("pause", "own-real", { owner: OTHER_OWNER }),
      d.op("resume", "own-real", { owner: OTHER_OWNER }),
      d.op("destroy", "own-real", { owner: OTHER_OWNER }),
      d.op("release-backing", "own-real", { owner: OTHER_OWNER }),
      d.op("merge-to-base", "own-real", { owner: OTHER_OWNER }),
    ];
    for (const r of await Promise.all(calls)) {
      expect(r.ok).toBe(false);
      expect(r.message).toBe(`SSH workspace runtime owner mismatch: ${dir}`);
    }
    expect(snapshot(dir)).toBe(before);
    expect((await d.inspect("own-real")).value?.inspection.status).toBe("ready");
  });

  it.each([
    ["another workspace id", (id: string) => manifestFor(`${id}-other`, OWNER)],
    ["a wrong runtime marker", (id: string) => manifestFor(id, OWNER, "ready", { marker: "someone-else/v9" })],
    ["a malformed manifest", () => "{not json"],
  ])("L1: a manifest with %s is refused and nothing is removed", async (_label, make) => {
    const id = `own-l1-${_label.replace(/\W+/g, "-")}`;
    const dir = plant(d.root, id, make(id));
    const before = snapshot(dir);
    for (const r of [await d.inspect(id), await d.op("destroy", id), await d.create(dirInput(id, fixture.path))]) {
      expect(r.message).toBe(`SSH workspace ownership mismatch: ${dir}`);
    }
    expect(snapshot(dir)).toBe(before);
  });

  it("L1: an unreadable manifest is refused", async () => {
    const dir = plant(d.root, "own-l1-unreadable", manifestFor("own-l1-unreadable", OWNER));
    chmodSync(onHost(join(dir, "manifest.json")), 0o000);
    expect((await d.inspect("own-l1-unreadable")).message).toBe(`SSH workspace ownership mismatch: ${dir}`);
    expect((await d.op("destroy", "own-l1-unreadable")).message).toBe(`SSH workspace ownership mismatch: ${dir}`);
    expect(existsSync(onHost(join(dir, "sentinel")))).toBe(true);
  });

  it("L2: an owned materializing leftover inspects as incomplete, is re-materialized by create, removed by destroy", async () => {
    const dir = plant(d.root, "own-l2", manifestFor("own-l2", OWNER, "materializing"));
    expect((await d.inspect("own-l2")).value?.inspection).toEqual({ status: "error", message: "SSH workspace is incomplete: own-l2" });
    expect((await d.op("pause", "own-l2")).message).toBe("SSH workspace is incomplete: own-l2");
    const r = await d.create(dirInput("own-l2", fixture.path));
    expect(r.value?.materializedFreshContent).toBe(true);
    expect((await d.inspect("own-l2")).value?.inspection.status).toBe("ready");
    // A second leftover, this time cleaned by destroy.
    rmSync(onHost(dir), { recursive: true, force: true });
    plant(d.root, "own-l2", manifestFor("own-l2", OWNER, "materializing"));
    expect((await d.op("destroy", "own-l2")).ok).toBe(true);
    expect(existsSync(onHost(dir))).toBe(false);
  });

  it("M1: a foreign directory appearing before the claim is refused and left intact", async () => {
    const { dir } = workspaceLayout(d.root, "own-m1");
    setWorkspaceHooks(d.root, "own-m1", { beforeClaimMs: 60_000 });
    const run = startCli(["create", "--workspace-id", "own-m1"], lifecycleRequest(d.options, { input: dirInput("own-m1", fixture.path) }), {
      PASEO_SSH_PROGRESS: "1",
    });
    // "connect" = the agent is up; the request follows at once and the agent then waits at the hook.
    await run.waitStderr(/"phase":"connect"/);
    await sleep(400);
    expect(existsSync(onHost(dir))).toBe(false);
    plant(d.root, "own-m1", null);
    releaseWorkspaceHooks(d.root, "own-m1");
    const r = await run.done;
    expect(r.code).toBe(7);
    expect(r.stderr.trim().split("\n").pop()).toBe(`SSH workspace ownership mismatch: ${dir}`);
    expect(readdirSync(onHost(dir)).sort()).toEqual(["sentinel"]);
  });

  it("N1: a foreign manifest appearing after the claim is refused and left untouched", async () => {
    const { dir } = workspaceLayout(d.root, "own-n1");
    setWorkspaceHooks(d.root, "own-n1", { afterClaimMs: 60_000 });
    const pending = d.create(dirInput("own-n1", fixture.path));
    const foreign = manifestFor("own-n1", OTHER_OWNER);
    // The create lock is written right after our manifest: from then on the agent sits in the hook.
    for (let i = 0; i < 500 && !existsSync(onHost(join(dir, "create.lock"))); i++) await sleep(20);
    expect(existsSync(onHost(join(dir, "manifest.json")))).toBe(true);
    writeFileSync(onHost(join(dir, "manifest.json")), foreign);
    releaseWorkspaceHooks(d.root, "own-n1");
    const r = await pending;
    expect(r.message).toBe(`SSH workspace runtime owner mismatch: ${dir}`);
    expect(readFileSync(onHost(join(dir, "manifest.json")), "utf8")).toBe(foreign);
    expect(readdirSync(onHost(dir)).sort()).toEqual(["manifest.json"]);
  });

  it("S9: hostile workspace ids stay confined under <root>/workspaces", async () => {
    const ids = ["../x", "a/b", "with spaces", "new\nline", "y".repeat(300)];
    for (const id of ids) {
      const r = await d.create(dirInput(id, fixture.path));
      expect(r.message).toBe("");
      expect(r.value?.placement.cwd).toBe(workspaceLayout(d.root, id).checkout);
      expect(r.value?.placement.cwd.startsWith(join(d.root, "workspaces", "paseo-ws-"))).toBe(true);
    }
    // test-hooks.json is this suite's own (earlier tests planted it), not the runtime's.
    const made = readdirSync(onHost(d.root)).filter((n) => n !== TEST_HOOKS_FILE);
    expect(made.sort()).toEqual(
      [".paseo-ssh-root", "agent", "cache", "run", "tmp", "workspaces"].filter((n) => existsSync(onHost(join(d.root, n)))),
    );
    expect(existsSync(onHost(join(d.root, "..", "x")))).toBe(false);
    for (const id of ids) expect((await d.op("destroy", id)).ok).toBe(true);
    for (const id of ids) expect(existsSync(onHost(workspaceLayout(d.root, id).dir))).toBe(false);
  });

  it("an interrupted create leaves a materializing workspace that destroy cleans", async () => {
    const { dir } = workspaceLayout(d.root, "own-int");
    setWorkspaceHooks(d.root, "own-int", { afterClaimMs: 60_000 });
    const pending = d.create(dirInput("own-int", fixture.path));
    for (let i = 0; i < 500 && !existsSync(onHost(join(dir, "create.lock"))); i++) await sleep(20);
    expect((await d.inspect("own-int")).value?.inspection).toEqual({ status: "error", message: "SSH workspace is incomplete: own-int" });
    expect((await d.op("destroy", "own-int")).ok).toBe(true);
    releaseWorkspaceHooks(d.root, "own-int");
    const r = await pending;
    // The create notices it lost its workspace and fails without resurrecting anything.
    expect(r.ok).toBe(false);
    await sleep(200);
    expect(existsSync(onHost(dir))).toBe(false);
  });

  it("a retried create while the first is still materializing is refused; reconcile leaves it alone; the first completes", async () => {
    const { dir } = workspaceLayout(d.root, "own-twice");
    setWorkspaceHooks(d.root, "own-twice", { afterClaimMs: 60_000 });
    const first = d.create(dirInput("own-twice", fixture.path));
    for (let i = 0; i < 500 && !existsSync(onHost(join(dir, "create.lock"))); i++) await sleep(20);
    const second = await d.create(dirInput("own-twice", fixture.path));
    expect(second.message).toBe("SSH workspace is being created concurrently: own-twice");
    expect((await d.reconcile(["own-real"])).ok).toBe(true);
    expect(existsSync(onHost(dir))).toBe(true);
    releaseWorkspaceHooks(d.root, "own-twice");
    const r = await first;
    expect(r.value?.materializedFreshContent).toBe(true);
    expect(existsSync(onHost(join(dir, "create.lock")))).toBe(false);
    expect((await d.op("destroy", "own-twice")).ok).toBe(true);
  });

  it("adopt re-owns a workspace for a moved Paseo home, only from its recorded owner", async () => {
    expect((await d.create(dirInput("own-adopt", fixture.path))).message).toBe("");
    const { dir } = workspaceLayout(d.root, "own-adopt");
    const adopt = (owner: string, flags: string[]) =>
      runCli(["adopt", "--workspace-id", "own-adopt", ...flags], {
        stdin: lifecycleRequest(d.options, { runtimeInstanceId: owner }),
        timeoutMs: 60_000,
      });
    const before = snapshot(dir);
    const wrong = await adopt(OTHER_OWNER, ["--from-runtime-instance-id", "e".repeat(64)]);
    expect(wrong.code).toBe(7);
    expect(wrong.stderr.trim()).toBe(`SSH workspace runtime owner mismatch: ${dir}`);
    expect(snapshot(dir)).toBe(before);

    const oldHome = createHash("sha256").update("/srv/old-paseo-home").digest("hex");
    expect((await adopt(oldHome, ["--from-runtime-instance-id", OWNER])).stdout.toString()).toBe('{"type":"ok","protocolVersion":1}\n');
    expect((await d.inspect("own-adopt")).message).toBe(`SSH workspace runtime owner mismatch: ${dir}`);
    expect((await d.inspect("own-adopt", { owner: oldHome })).value?.inspection.status).toBe("ready");
    // Back again, naming the previous home by path; a repeat is a no-op.
    expect((await adopt(OWNER, ["--from-paseo-home", "/srv/old-paseo-home"])).code).toBe(0);
    expect((await adopt(OWNER, ["--from-paseo-home", "/srv/old-paseo-home"])).code).toBe(0);
    expect((await d.inspect("own-adopt")).value?.inspection.status).toBe("ready");
    expect((await d.op("destroy", "own-adopt")).ok).toBe(true);
  });

  it("P1: reconcile removes exactly the owned orphans", async () => {
    expect((await d.create(dirInput("own-keep", fixture.path))).ok).toBe(true);
    expect((await d.create(dirInput("X", fixture.path))).ok).toBe(true);
    const a = workspaceLayout(d.root, "X").dir;
    const b = plant(d.root, "X-foreign-b", manifestFor("X-foreign", OWNER)); // wrong name for its id
    const bRenamed = `${workspaceLayout(d.root, "X-foreign").dir}-foreign`;
    execFileSync("mv", [onHost(b), onHost(bRenamed)]);
    const c = plant(d.root, "own-p1-c", manifestFor("own-p1-c", OTHER_OWNER));
    // Without workspaceIds every owned workspace would look orphaned: refused, nothing removed.
    const bare = await runCli(["reconcile"], { stdin: lifecycleRequest(d.options), timeoutMs: 60_000 });
    expect(bare.code).toBe(2);
    expect(bare.stdout.toString()).toBe("");
    expect(existsSync(onHost(a))).toBe(true);
    const quiet = await d.reconcile(["own-keep", "own-real"]);
    expect(quiet.ok).toBe(true);
    expect(quiet.stderr).toBe("");
    expect(existsSync(onHost(a))).toBe(false);
    expect(existsSync(onHost(bRenamed))).toBe(true);
    expect(existsSync(onHost(c))).toBe(true);
    expect((await d.inspect("own-keep")).value?.inspection.status).toBe("ready");
    expect((await d.inspect("own-real")).value?.inspection.status).toBe("ready");

    expect((await d.create(dirInput("X2", fixture.path))).ok).toBe(true);
    const verbose = await d.reconcile(["own-keep", "own-real"], { verbose: true });
    expect(verbose.stderr.trim().split("\n")).toEqual([
      `reconcile: removed orphaned workspace "X2" (${workspaceLayout(d.root, "X2").dir})`,
    ]);
    // Caches: kept while any workspace uses them (even when old), pruned once unused and old.
    const cacheBase = join(d.root, "cache");
    const caches = () => readdirSync(onHost(cacheBase)).sort();
    const age = () => execFileSync("sh", ["-c", `touch -d '1 hour ago' ${onHost(cacheBase)}/*.git`]);
    expect(caches().length).toBe(1);
    age();
    expect((await d.reconcile(["own-keep", "own-real"])).ok).toBe(true);
    expect(caches().length).toBe(1);
    for (const id of ["own-keep", "own-real"]) expect((await d.op("destroy", id)).ok).toBe(true);
    // A manifest we do not accept (another runtime version) but that names the cache still keeps it.
    const key = caches()[0]!.replace(/\.git$/, "");
    const foreign = plant(
      d.root,
      "own-p1-version",
      manifestFor("own-p1-version", OWNER, "ready", { marker: "paseo-ssh-runtime/workspace-v2", projectKey: key }),
    );
    age();
    expect((await d.reconcile([])).ok).toBe(true);
    expect(caches()).toEqual([`${key}.git`]);
    expect(existsSync(onHost(foreign))).toBe(true);
    rmSync(onHost(foreign), { recursive: true, force: true });
    expect((await d.reconcile([])).ok).toBe(true);
    expect(caches()).toEqual([]);
  });
});
