// Removal paths reap the workspace's processes (docs/contract.md#scenarios P1, B1/B2 on a
// paused workspace, release-backing of a paused workspace): driven through the exec harness so
// the processes are real workload processes started by our exec over the real sshd.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ExecWorkspace, eventually, exitOf } from "../support/exec.js";
import { gitIn } from "../fixtures/repo.js";
import { onHost, requireView, type HostProcess } from "../support/host-view.js";

/** Live processes on the host whose command line contains `marker`. */
function withMarker(marker: string): HostProcess[] {
  return requireView()
    .processes()
    .filter((p) => p.state !== "Z" && p.argv.join(" ").includes(marker));
}
const pidsWith = (marker: string) => withMarker(marker).map((p) => p.pid);

async function startLoop(ws: ExecWorkspace): Promise<string> {
  const marker = `paseo-loop-${randomBytes(4).toString("hex")}`;
  const loop = `setsid sh -c 'while :; do echo ${marker} >> tick.txt; sleep 0.1; done' </dev/null >/dev/null 2>&1 &`;
  expect(exitOf(await ws.run({ argv: ["/bin/sh", "-c", loop], env: { PATH: "/usr/bin:/bin" } }))).toEqual({ code: 0, signal: null });
  await eventually(
    () => pidsWith(marker).length,
    (n) => n > 0,
    3000,
  );
  expect(pidsWith(marker).length).toBeGreaterThan(0);
  return marker;
}

describe("removal reaps the process set", () => {
  const made: ExecWorkspace[] = [];
  afterEach(async () => {
    for (const ws of made.splice(0)) await ws.cleanup();
  });

  it("P1(a): reconcile removes an orphan together with its processes", async () => {
    const ws = new ExecWorkspace("ws-rec");
    made.push(ws);
    await ws.create();
    const marker = await startLoop(ws);
    const r = await ws.lifecycle("reconcile", { workspaceIds: [] });
    expect(r.code).toBe(0);
    // Stopped before the snapshot, so what it wrote came back instead of going to the host's archive.
    expect(r.stderr).toBe("");
    const [uncommitted] = gitIn(ws.localRepo, ["for-each-ref", "--format=%(refname)", "refs/paseo-ssh/*/uncommitted"]).split("\n");
    expect(gitIn(ws.localRepo, ["show", `${uncommitted}:tick.txt`])).toContain(marker);
    expect(existsSync(onHost(ws.root))).toBe(false);
    expect(
      await eventually(
        () => pidsWith(marker),
        (p) => p.length === 0,
        3000,
      ),
    ).toEqual([]);
  });

  it("B1/B2 (user workspace): a paused workspace keeps its directory with nothing runnable; release-backing reaps it; destroy twice is ok", async () => {
    const ws = new ExecWorkspace("ws-disc");
    made.push(ws);
    await ws.create();
    const marker = await startLoop(ws);
    expect((await ws.lifecycle("pause")).code).toBe(0);
    const manifest = join(ws.root, "..", "manifest.json");
    expect(JSON.parse(readFileSync(onHost(manifest), "utf8")).phase).toBe("paused");
    const states = withMarker(marker).map((p) => p.state);
    expect(states.length).toBeGreaterThan(0);
    expect(states.every((s) => s === "T")).toBe(true);

    const released = await ws.lifecycle("release-backing");
    expect(released.code).toBe(0);
    expect(existsSync(onHost(ws.root))).toBe(false);
    expect(
      await eventually(
        () => pidsWith(marker),
        (p) => p.length === 0,
        3000,
      ),
    ).toEqual([]);
    for (let i = 0; i < 2; i++) expect((await ws.lifecycle("destroy")).code).toBe(0);
  });
});
