// The bare `paseo-workspace-helper` resolves without PATH (docs/contract.md#helper), and the
// cost of one whole exec through the protocol, measured against the real sshd.
import { cpus, loadavg } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecWorkspace, exitOf } from "../support/exec.js";

describe("helper launch and exec cost over SSH", () => {
  const ws = new ExecWorkspace("exec-helper");
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("bare paseo-workspace-helper with env {} runs our helper at the workspace root", async () => {
    const r = await ws.run({ argv: ["paseo-workspace-helper", "describe"], env: {}, purpose: "workspace-helper" });
    expect(exitOf(r)).toEqual({ code: 0, signal: null });
    expect(JSON.parse(r.stdout.toString("utf8"))).toEqual({
      protocolVersion: 1,
      version: 1,
      capabilities: ["files", "watch", "resolve-command"],
    });
  });

  it("A7: a helper watch session through the runtime sees a workload rewrite committed.txt", async () => {
    const watch = ws.start({ argv: ["paseo-workspace-helper", "watch"], env: {}, purpose: "workspace-helper" }, { keepStdinOpen: true });
    await watch.waitOutput('{"protocolVersion":1,"type":"ready"}');
    watch.stdin.write('{"protocolVersion":1,"type":"subscribe","id":"s1","paths":["committed.txt"],"recursive":false,"ignoredPaths":[]}\n');
    await watch.waitOutput('{"protocolVersion":1,"type":"subscribed","subscriptionId":"s1"}');
    const edit = await ws.run({ argv: ["/bin/sh", "-c", "printf container-change > committed.txt"], env: {} });
    expect(exitOf(edit)).toEqual({ code: 0, signal: null });
    await watch.waitOutput('{"protocolVersion":1,"type":"changed","subscriptionId":"s1","paths":["committed.txt"]}', 5000);
    watch.stdin.end('{"protocolVersion":1,"type":"close"}\n');
    expect(exitOf(await watch.done)).toEqual({ code: 0, signal: null });
  });

  it("measures /bin/true through the full exec protocol", async () => {
    const times: number[] = [];
    for (let i = 0; i < 7; i++) {
      const r = await ws.run({ argv: ["/bin/true"] });
      expect(exitOf(r)).toEqual({ code: 0, signal: null });
      times.push(r.ms);
    }
    const p50 = [...times].sort((a, b) => a - b)[3]!;
    const load = loadavg()[0]! / cpus().length;
    console.log(
      `exec /bin/true wall times (ms): ${times.map((t) => t.toFixed(0)).join(", ")}; p50 ${p50.toFixed(0)}; load/cpu ${load.toFixed(1)}`,
    );
    expect(p50).toBeLessThan(load < 1 ? 1000 : 3000);
  });
});
