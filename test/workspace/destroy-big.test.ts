// Destroying a big workspace does not freeze the host daemon: its 40,000 files are deleted off the
// daemon's event loop (renamed into the root's trash, then removed by a child `rm`), so a `signal`
// to an exec of another workspace of the same daemon answers within the contract's 750 ms budget
// and reaches the workload while the destroy is still deleting, and the deleter runs at the lowest
// CPU priority. Against the real sshd.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ExecWorkspace, exitOf } from "../support/exec.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { waitFor } from "../rig/rig.js";
import { longSuite, needs } from "../support/needs.js";
import { requireView } from "../support/host-view.js";

const PATH = { PATH: "/usr/bin:/bin" };
/** Paseo's whole budget for `signal` (contract). */
const SIGNAL_BUDGET_MS = 750;

/** A local process's nice value (/proc/<pid>/stat field 19; the name in field 2 may hold spaces). */
function niceOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
}

/** Writes 200 directories of 200 files of 3 KB (files with content: deleting them is real work). */
const FILL = `const fs=require("fs");const b=Buffer.alloc(3000,97);for(let d=0;d<200;d++){fs.mkdirSync("big/"+d,{recursive:true});for(let f=0;f<200;f++)fs.writeFileSync("big/"+d+"/"+f,b)}`;

describe(
  "destroying a 40,000-file workspace",
  longSuite("a 40,000-file destroy", needs.localHost("writes the 40,000 files into the host's workspace directly")),
  () => {
    const big = new ExecWorkspace("destroy-big");
    // Another workspace of the same root: the same host daemon serves both.
    const other = new ExecWorkspace("destroy-big-other", { root: big.configuredRoot });
    afterAll(async () => {
      await other.cleanup();
      await big.cleanup();
    });

    it("a signal to another workspace's exec answers within 750 ms and is delivered while the destroy deletes", async () => {
      await big.create();
      await other.create();
      expect(exitOf(await big.run({ argv: [process.execPath, "-e", FILL], env: PATH }))).toEqual({ code: 0, signal: null });
      expect(readdirSync(join(big.root, "big")).length).toBe(200);

      const h = other.start({
        argv: ["/bin/sh", "-c", "trap 'echo term; exit 9' TERM; echo ready; while :; do sleep 0.05; done"],
        env: PATH,
      });
      await h.waitOutput("ready\n");

      const tmp = join(big.configuredRoot, "tmp");
      const key = workspaceLayout(big.configuredRoot, big.workspaceId).key;
      const trash = () => (existsSync(tmp) ? readdirSync(tmp).find((n) => n.startsWith(`trash-${key}-`)) : undefined);
      let destroyed = false;
      const destroy = big.lifecycle("destroy").then((r) => {
        destroyed = true;
        return r;
      });
      // The workspace was renamed into the trash: its files are being deleted now.
      await waitFor(() => trash() !== undefined || destroyed, 60_000);
      expect(destroyed).toBe(false);
      const entry = trash()!;
      // The deleter is the child `rm`, at nice 19: the other workspace's work goes first.
      let deleter: number | undefined;
      await waitFor(() => {
        deleter = requireView()
          .processes()
          .find((p) => p.argv[0] === "rm" && p.argv.some((a) => a.includes(entry)))?.pid;
        return deleter !== undefined || destroyed;
      }, 10_000);
      expect(deleter).toBeDefined();
      expect(niceOf(deleter!)).toBe(19);

      const sig = await other.signal(h.execId, "SIGTERM");
      // Answered and delivered while the destroy was still deleting the files.
      const stillDeleting = !destroyed && existsSync(join(tmp, entry));
      expect(sig.stderr).toBe("");
      expect(sig.code).toBe(0);
      expect(stillDeleting).toBe(true);
      expect(sig.ms).toBeLessThanOrEqual(SIGNAL_BUDGET_MS);
      console.log(`signal answered in ${sig.ms.toFixed(0)} ms during the destroy`);

      const r = await h.done;
      expect(exitOf(r)).toEqual({ code: 9, signal: null });
      expect(r.stdout.toString()).toBe("ready\nterm\n");
      const d = await destroy;
      expect(d.stderr).toBe("");
      expect(d.code).toBe(0);
      // The destroy answers once the files are gone: nothing is left in the trash.
      expect(existsSync(join(tmp, entry))).toBe(false);
      expect(existsSync(join(big.root))).toBe(false);
    }, 240_000);
  },
);
