// The live mirror over the real sshd (issue 27 item 1): a commit an agent makes inside a long-lived
// exec is in the Paseo side repository within seconds, with no Paseo operation called: the host
// daemon sees the workspace's refs move and says so on the notices stream, the broker hands the
// notice to the runtime's work-notice operation, which brings the commits back. A new branch
// appears as a local branch and a later commit moves it; after a link reset the mirror catches up.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { execFileSync } from "node:child_process";
import { ExecWorkspace, exitOf } from "../support/exec.js";
import { throughProxy } from "../support/host-daemon.js";
import type { DelayProxy } from "../../bench/delay-proxy.mjs";

const ENV = { PATH: "/usr/local/bin:/usr/bin:/bin" };
const GIT = "git -c user.name=Agent -c user.email=agent@example.com";
const MIRROR_BOUND_MS = 10_000;

/** The commit `ref` names in `repo`, or null. */
function refIn(repo: string, ref: string): string | null {
  try {
    return execFileSync("git", ["-C", repo, "rev-parse", "--verify", "-q", ref], { encoding: "utf8" }).trim();
  } catch {
    return null;
  }
}

async function waitForRef(repo: string, ref: string, want: string, ms = MIRROR_BOUND_MS): Promise<number> {
  const start = Date.now();
  while (Date.now() - start < ms) {
    if (refIn(repo, ref) === want) return Date.now() - start;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${ref} did not reach ${want} in ${repo} within ${ms} ms (it is ${refIn(repo, ref)})`);
}

describe("the live mirror", () => {
  const ws = new ExecWorkspace("live-mirror", { brokerIdleMs: 300_000 });
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("a commit inside a live exec reaches the local repository within 10 s with no operation called; the next one moves the branch", async () => {
    // The agent: a new branch, a commit, then (on a line on stdin) another commit; then it waits.
    const script = [
      `${GIT} switch -q -c agent/live`,
      "echo one > live.txt",
      "git add live.txt",
      `${GIT} commit -q -m one`,
      "git rev-parse HEAD",
      "read line",
      "echo two > live.txt",
      `${GIT} commit -q -am two`,
      "git rev-parse HEAD",
      "read line",
    ].join(" && ");
    const h = ws.start({ argv: ["/bin/sh", "-c", script], env: ENV }, { keepStdinOpen: true });
    await h.waitOutput("\n");
    const first = h.output().toString("utf8").trim();
    expect(first).toMatch(/^[0-9a-f]{40}$/);
    const ms1 = await waitForRef(ws.localRepo, "refs/heads/agent/live", first);
    expect(refIn(ws.localRepo, `refs/paseo-ssh/${ws.workspaceId}/head`)).toBe(first);
    h.stdin.write("go\n");
    const second = await waitForSecondLine(h);
    const ms2 = await waitForRef(ws.localRepo, "refs/heads/agent/live", second);
    console.log(`live mirror: commit -> local ref in ${ms1} ms (new branch), ${ms2} ms (next commit)`);
    expect(execFileSync("git", ["-C", ws.localRepo, "show", `${second}:live.txt`], { encoding: "utf8" })).toBe("two\n");
    // The user's checkout did not move.
    expect(execFileSync("git", ["-C", ws.localRepo, "symbolic-ref", "HEAD"], { encoding: "utf8" }).trim()).toBe("refs/heads/main");
    h.stdin.end("end\n");
    expect(exitOf(await h.done)).toEqual({ code: 0, signal: null });
  }, 60_000);
});

describe("the live mirror across a link outage", () => {
  const cleanups = suite("all");
  let proxy: DelayProxy;
  let ws: ExecWorkspace;
  beforeAll(async () => {
    const through = await throughProxy(cleanups, { keepaliveIntervalMs: 1000, brokerIdleMs: 300_000 });
    proxy = through.proxy;
    ws = new ExecWorkspace("live-mirror-outage", through.options);
    // Newest first: the workspace is removed before the proxy it goes through closes.
    cleanups.push(() => ws.cleanup());
    await ws.create();
  });

  it("a commit made while the link is down arrives once it is back, with no operation called", async () => {
    const script = [
      `${GIT} switch -q -c agent/outage`,
      "read line",
      "sleep 2",
      "echo during > outage.txt",
      "git add outage.txt",
      `${GIT} commit -q -m during`,
      "git rev-parse HEAD",
      "read line",
    ].join(" && ");
    const h = ws.start({ argv: ["/bin/sh", "-c", script], env: ENV }, { keepStdinOpen: true });
    await h.waitEvent("started");
    const base = refIn(ws.localRepo, "refs/heads/main")!;
    await waitForRef(ws.localRepo, "refs/heads/agent/outage", base);
    // The agent is told to commit in 2 s; then the host's sshd goes away (connections reset, the
    // port refuses), and the commit happens on the host during the outage.
    h.stdin.write("go\n");
    await new Promise((r) => setTimeout(r, 300));
    const restore = proxy.refuse();
    await new Promise((r) => setTimeout(r, 4000));
    expect(refIn(ws.localRepo, `refs/paseo-ssh/${ws.workspaceId}/head`)).toBe(base);
    restore();
    await h.waitOutput("\n", 30_000);
    const during = h.output().toString("utf8").trim();
    expect(during).toMatch(/^[0-9a-f]{40}$/);
    const ms = await waitForRef(ws.localRepo, "refs/heads/agent/outage", during, 30_000);
    console.log(`live mirror: caught up ${ms} ms after the commit id reached the wrapper`);
    h.stdin.end("end\n");
    expect(exitOf(await h.done)).toEqual({ code: 0, signal: null });
  }, 90_000);
});

async function waitForSecondLine(h: { output(): Buffer }): Promise<string> {
  const start = Date.now();
  while (Date.now() - start < 15_000) {
    const lines = h.output().toString("utf8").trim().split("\n");
    if (lines.length >= 2 && /^[0-9a-f]{40}$/.test(lines[1]!)) return lines[1]!;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no second commit id: ${h.output().toString("utf8")}`);
}
