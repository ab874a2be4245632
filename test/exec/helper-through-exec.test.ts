// The bare `paseo-workspace-helper` resolves without PATH (docs/contract.md#helper), and a helper
// watch session through the runtime sees a workload's edit, against the real sshd. (The cost of an
// exec is measured by `npm run bench`, not here.)
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecWorkspace, exitOf } from "../support/exec.js";

describe("the helper through exec over SSH", () => {
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
});
