// The work-comes-back rows (docs/workspaces.md "Work comes back"), direct and at 50 ms RTT:
//   * live mirror: a commit made on the host (by `ssh host git commit`, as an agent would in its
//     checkout) until it is a ref in the local repository, with no operation called. Timed from
//     the moment ssh returned the new commit id (the commit is at least half an RTT older), polled
//     every 10 ms. Target: ≤ 1 RTT + 1 s.
//   * destroy of a workspace with 10 new commits (10 × 16 KiB of random bytes), once the live
//     mirror has brought them back (as it normally has), against one with none. Target: the
//     difference ≤ 1 RTT + 250 ms.
//   * bytes: how much the local repository grew (git count-objects) once the live mirror brought
//     the 2 × 10 such commits of two workspaces back, against the bytes they add (only new objects
//     travel, one thin pack per move). Target: ≤ 1.25 ×.
import { createHash } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { git } from "./repos.mjs";
import { lastLine, runCommand } from "./runtime-driver.mjs";
import { median } from "./sampling.mjs";
import { rigOptions, sshArgs } from "./rig.mjs";

const COMMITS = 10;
const BLOB = 16 * 1024;
const LATENCY_SAMPLES = 5;

const key = (id) => createHash("sha256").update(id, "utf8").digest("hex").slice(0, 20);

/** Loose plus packed object bytes of the repository, in KiB (git count-objects -v). */
async function repoKiB(repo) {
  const r = await runCommand("git", ["-C", repo, "count-objects", "-v"]);
  const field = (name) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(r.stdout)?.[1] ?? 0);
  return field("size") + field("size-pack");
}

async function localRef(repo, ref) {
  const r = await runCommand("git", ["-C", repo, "rev-parse", "--verify", "-q", ref]);
  return r.code === 0 ? r.stdout.trim() : null;
}

export async function benchMirror(ctx, net) {
  const { rt, rig } = ctx;
  const log = (s) => ctx.log(`[mirror ${net.name}] ${s}`);
  const rootName = `.paseo-ssh-test-${rig.runId}-bench-mirror-${net.key}`;
  const options = rigOptions(ctx, net.port, rootName, { brokerIdleMs: 600_000 });
  const ssh = (cmd) => runCommand("ssh", sshArgs(ctx, net.port, cmd));
  const base = mkdtempSync(join(ctx.tmp, `mirror-${net.key}-`));
  const repo = join(base, "repo");
  await git(["clone", "-q", ctx.repos.tiny.path, repo], { cwd: base });
  const create = async (workspaceId) => {
    const r = await rt.op("create", {
      workspaceId,
      options,
      extra: {
        input: {
          workspaceId,
          project: { projectId: `bench-mirror-${net.key}`, source: { kind: "directory", path: repo } },
          placement: { kind: "branch", branchName: `agent/${workspaceId}`, baseRef: "main" },
        },
      },
    });
    if (r.code !== 0) throw new Error(`create ${workspaceId}: ${lastLine(r.stderr)}`);
    return `${rootName}/workspaces/paseo-ws-${key(workspaceId)}/checkout`;
  };
  const commitOnHost = async (checkout, withBlob) => {
    const add = withBlob ? `head -c ${BLOB} /dev/urandom > f-$(date +%s%N) && git add -A && ` : "";
    const r = await ssh(
      `cd ${checkout} && ${add}git -c user.name=bench -c user.email=b@example.invalid commit -q --allow-empty -m c && git rev-parse HEAD`,
    );
    if (r.code !== 0) throw new Error(`commit on the host: ${lastLine(r.stderr)}`);
    return r.stdout.trim();
  };
  const out = { name: net.name, rttMs: net.rttMs };

  // Live mirror latency.
  const live = await create("bench-live");
  const latencies = [];
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const sha = await commitOnHost(live, false);
    const t0 = performance.now();
    for (;;) {
      if ((await localRef(repo, "refs/paseo-ssh/bench-live/head")) === sha) break;
      if (performance.now() - t0 > 30_000) throw new Error("the commit did not come back within 30 s");
      await new Promise((r) => setTimeout(r, 10));
    }
    latencies.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 300));
  }
  out.liveMs = Math.round(median(latencies));
  out.liveSamples = latencies.map(Math.round);
  log(`commit -> local ref: median ${out.liveMs} ms (${out.liveSamples.join(", ")})`);
  await rt.op("destroy", { workspaceId: "bench-live", options });

  // Destroy with 10 new commits against none; then bytes through `work`.
  const withWork = await create("bench-ten");
  await create("bench-none");
  const bytesWs = await create("bench-bytes");
  const sizeBefore = await repoKiB(repo);
  let last = "";
  let lastTen = "";
  for (let i = 0; i < COMMITS; i++) {
    lastTen = await commitOnHost(withWork, true);
    last = await commitOnHost(bytesWs, true);
  }
  const t0 = performance.now();
  while (
    (await localRef(repo, "refs/paseo-ssh/bench-bytes/head")) !== last ||
    (await localRef(repo, "refs/paseo-ssh/bench-ten/head")) !== lastTen
  ) {
    if (performance.now() - t0 > 60_000) throw new Error("the commits did not come back within 60 s");
    await new Promise((r) => setTimeout(r, 50));
  }
  out.workBytes = ((await repoKiB(repo)) - sizeBefore) * 1024;
  out.newBytes = 2 * COMMITS * BLOB;
  const dTen = await rt.op("destroy", { workspaceId: "bench-ten", options });
  const dNone = await rt.op("destroy", { workspaceId: "bench-none", options });
  if (dTen.code !== 0 || dNone.code !== 0) throw new Error(`destroy: ${lastLine(dTen.stderr + dNone.stderr)}`);
  out.destroyTenMs = Math.round(dTen.ms);
  out.destroyNoneMs = Math.round(dNone.ms);
  await rt.op("destroy", { workspaceId: "bench-bytes", options });
  log(
    `destroy: ${out.destroyTenMs} ms with ${COMMITS} new commits, ${out.destroyNoneMs} ms with none; the repository grew ${out.workBytes} bytes for ${out.newBytes} new`,
  );

  const budgetLive = net.rttMs + 1000;
  const budgetDestroy = net.rttMs + 250;
  out.target = {
    met: out.liveMs <= budgetLive && out.destroyTenMs - out.destroyNoneMs <= budgetDestroy && out.workBytes <= out.newBytes * 1.25,
    text:
      `commit -> local ${out.liveMs} ms (limit ${Math.round(budgetLive)}); ` +
      `destroy +${out.destroyTenMs - out.destroyNoneMs} ms for ${COMMITS} commits (limit ${Math.round(budgetDestroy)}); ` +
      `local repository +${out.workBytes} bytes for ${out.newBytes} new (limit 1.25×)`,
  };
  await ssh(`rm -rf ${rootName}`);
  return out;
}

export function mirrorMarkdown(rows, table) {
  if (!rows?.length) return [];
  return [
    "",
    "### Work comes back (live mirror, destroy, bytes)",
    "",
    table(
      [
        "network",
        "commit -> local ref (ms, median)",
        "destroy, 10 new commits (ms)",
        "destroy, none (ms)",
        "local growth / new bytes",
        "target",
      ],
      rows.map((r) => [
        r.name,
        r.liveMs,
        r.destroyTenMs,
        r.destroyNoneMs,
        `${r.workBytes} / ${r.newBytes}`,
        `${r.target.met ? "met" : "MISSED"}: ${r.target.text}`,
      ]),
    ),
  ];
}
