// Exec cwd when the host's root is reached through a symlink (issue 30 item 14): Paseo's client
// sends absolute paths under `placement.cwd`, and a user may equally write the real path, so both
// spellings of the workspace (through the link and after realpath) must run there, while every
// escape is still refused with the text Paseo's command-runtime tests assert.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { ExecWorkspace, exitOf, expectRunsIn } from "../support/exec.js";
import { requireView } from "../support/host-view.js";
import { suiteRoot } from "../support/workspace.js";
import { rig } from "../rig/rig.js";

describe("exec cwd under a root configured through a symlink", () => {
  const real = suiteRoot("cwd-real");
  const link = `${real}-link`;
  const onHostAsUser = (argv: string[]) => requireView().run(rig().user, argv, { cwd: "/", env: { PATH: "/usr/bin:/bin" } });
  let ws: ExecWorkspace;

  beforeAll(async () => {
    onHostAsUser(["mkdir", "-m", "700", real]);
    onHostAsUser(["ln", "-s", real, link]);
    ws = new ExecWorkspace("cwd-link", { root: link });
    await ws.create();
    expect(exitOf(await ws.run({ argv: ["/bin/mkdir", "-p", "src"] }))).toEqual({ code: 0, signal: null });
  });
  afterAll(async () => {
    await ws?.cleanup();
    onHostAsUser(["rm", "-rf", link, real]);
  });

  it("the workspace root and <root>/src run there, spelled through the link or by their real path", async () => {
    const viaLink = workspaceLayout(link, ws.workspaceId).checkout;
    const viaReal = workspaceLayout(real, ws.workspaceId).checkout;
    expect([viaLink, viaReal]).toContain(ws.root);
    await expectRunsIn(ws, [
      [viaLink, viaReal],
      [`${viaLink}/src`, `${viaReal}/src`],
      [viaReal, viaReal],
      [`${viaReal}/src`, `${viaReal}/src`],
      [`${viaLink}/src/..`, viaReal],
    ]);
  });

  it("a missing directory inside, in either spelling, is named as missing, not as an escape", async () => {
    for (const base of [workspaceLayout(link, ws.workspaceId).checkout, workspaceLayout(real, ws.workspaceId).checkout]) {
      const r = await ws.run({ argv: ["/bin/true"], cwd: join(base, "missing") });
      expect(r.fd4).toBe("");
      expect(r.stderr).toContain("Workspace cwd does not exist");
    }
  });

  it.each([["/tmp"], ["../x"], [`${link}`], [`${real}/workspaces`]])(
    "cwd %s is refused with the escape text and nothing launched",
    async (cwd) => {
      const r = await ws.run({ argv: ["/bin/sh", "-c", "touch escaped-marker"], cwd });
      expect(r.stderr).toContain("Workspace cwd escapes its runtime root");
      expect(r.code).not.toBe(0);
      expect(r.fd4).toBe("");
    },
  );
});
