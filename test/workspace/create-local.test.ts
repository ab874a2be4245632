// Agent workspace logic through the bundled agent as a local child (LocalHost): fast feedback on
// materialization and transfer negotiation. The same behaviours are proven over real SSH in
// lifecycle.test.ts.
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { LocalHost } from "../support/local-host.js";
import { prepareCreate, runCreate } from "../../src/workspace/create-workspace.js";
import type { Progress } from "../../src/workspace/progress.js";
import { commitAll, gitIn, localRepoFingerprint, seedRepo, type FixtureRepo } from "../fixtures/repo.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import type { CreateInput } from "../../src/contract/schemas.js";

const OWNER = "a".repeat(64);

/** Size of a self-contained pack of HEAD: what a transfer without negotiation would send. */
function fullPackSize(repo: string): number {
  return execFileSync("git", ["pack-objects", "--revs", "--stdout", "-q"], { cwd: repo, input: "HEAD\n" }).length;
}

function recorder(): Progress & { marks: Array<{ phase: string; bytes?: number }> } {
  const marks: Array<{ phase: string; bytes?: number }> = [];
  return { marks, mark: (phase, extra) => marks.push({ phase, ...extra }) };
}

function input(workspaceId: string, repo: string, placement: CreateInput["placement"] = { kind: "existing" }): CreateInput {
  return { workspaceId, project: { projectId: "proj", source: { kind: "directory", path: repo } }, placement };
}

describe("create through a local agent", () => {
  const s = suite("all");
  let base: string;
  let root: string;
  let fixture: FixtureRepo;
  let host: LocalHost;

  beforeAll(() => {
    base = s.tmp("paseo-ws-local-");
    root = join(base, "root");
    fixture = seedRepo(base);
    host = new LocalHost(root);
  });

  it("materializes committed content on main, then reuses the cache and sends only deltas", async () => {
    const before = localRepoFingerprint(fixture.path);
    const p1 = recorder();
    const r1 = await runCreate(host, await prepareCreate(input("ws-1", fixture.path), OWNER), p1);
    expect(r1.materializedFreshContent).toBe(true);
    const checkout = workspaceLayout(root, "ws-1").checkout;
    expect(r1.view.cwd).toBe(checkout);
    expect(r1.view.lifecycleEnvironment.PASEO_BRANCH_NAME).toBe("main");
    expect(gitIn(checkout, ["symbolic-ref", "--short", "HEAD"]).trim()).toBe("main");
    expect(gitIn(checkout, ["status", "--porcelain"])).toBe("");
    expect(existsSync(join(checkout, ".env"))).toBe(false);
    expect(readlinkSync(join(checkout, "outside-link"))).toBe("/etc/passwd");
    expect(lstatSync(join(checkout, "fixture-agent.mjs")).mode & 0o111).not.toBe(0);
    expect(readFileSync(join(checkout, "large.bin")).length).toBe(700_000);
    const first = p1.marks.find((m) => m.phase === "objects-sent")?.bytes ?? -1;
    expect(first).toBeGreaterThan(0);
    expect(localRepoFingerprint(fixture.path)).toEqual(before);

    const p2 = recorder();
    const r2 = await runCreate(host, await prepareCreate(input("ws-2", fixture.path), OWNER), p2);
    expect(r2.materializedFreshContent).toBe(true);
    expect(p2.marks.find((m) => m.phase === "objects-sent")?.bytes).toBe(0);

    writeFileSync(join(fixture.path, "committed.txt"), "v2\n");
    commitAll(fixture.path, "v2");
    const p3 = recorder();
    await runCreate(host, await prepareCreate(input("ws-3", fixture.path), OWNER), p3);
    const delta = p3.marks.find((m) => m.phase === "objects-sent")?.bytes ?? -1;
    expect(delta).toBeGreaterThan(0);
    expect(delta).toBeLessThan(fullPackSize(fixture.path));
    expect(readFileSync(join(workspaceLayout(root, "ws-3").checkout, "committed.txt"), "utf8")).toBe("v2\n");
    console.log(`bytes first=${first} second=0 delta=${delta}`);

    const again = await runCreate(host, await prepareCreate(input("ws-1", fixture.path), OWNER), recorder());
    expect(again.materializedFreshContent).toBe(false);
  });
});
