// Everything the bench measures over one network path (direct to the rig's sshd, or through the
// delay proxy), in one remote root of its own so each path starts with a cold host: creates of
// both repositories against `git archive | ssh tar`, interleaved latency rounds (node floor,
// describe, pipes and PTY execs), OpenSSH references, signal, 100 live execs (broker RSS), traced
// execs (where the time goes), a pool of three hosts (pool.mjs), and the process counts along the way. Ends by stopping what it
// started on the host and locally, and says what it had to kill.
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { brokers, hostProcesses, rssKb, sshdSessions, startTimeline, summariseTimeline, terminate } from "./procs.mjs";
import { shutdownBrokers } from "./broker-shutdown.mjs";
import { commitOneFile, git } from "./repos.mjs";
import { interleaved, once, reason, sequential, stats, unavailable } from "./sampling.mjs";
import { runCommand, lastLine } from "./runtime-driver.mjs";
import { childCommands, execPhases, medianPhases, opPhases, takeCliTrace, traceEnv, wireTrace } from "./exec-profile.mjs";
import { startProxy } from "./proxy-process.mjs";
import { benchPool } from "./pool.mjs";
import { rigOptions, sshArgs } from "./rig.mjs";

const mb = (kb) => +(kb / 1024).toFixed(1);

export async function benchNetwork(ctx, net) {
  const { rt, rig, plan } = ctx;
  const log = (s) => ctx.log(`[${net.name}] ${s}`);
  const rootName = `.paseo-ssh-test-${rig.runId}-bench-${net.key}`;
  const options = rigOptions(ctx, net.port, rootName);
  const ssh = (...args) => sshArgs(ctx, net.port, ...args);
  const out = { name: net.name, rttMs: net.rttMs, rows: {}, creates: {}, profiles: {}, procs: {} };
  const rows = out.rows;
  const host = () => hostProcesses(ctx.sshdPid, rootName);
  const brokerSnapshot = () => {
    const list = brokers(ctx.tmp);
    const kb = list.map(rssKb);
    return { count: list.length, rssMB: mb(kb.reduce((a, b) => a + b, 0)), maxRssMB: mb(Math.max(0, ...kb)) };
  };
  const wanted = (group) => plan.groups.has(group) && (!plan.onlyRtt50[group] || net.key === "rtt50");

  const createInput = (workspaceId, repo, projectId) => ({
    input: {
      workspaceId,
      project: { projectId, source: { kind: "directory", path: repo.path } },
      placement: { kind: "existing" },
    },
  });
  /**
   * One create with progress lines on (and, with `timeline`, the git/node processes sampled);
   * resolves with its time, the object bytes it reported sending and its progress marks. The
   * project id keys the host's object cache: a new one means a cold cache.
   */
  const create = async (workspaceId, repo, { projectId = `bench-${repo.id}`, timeline = false } = {}) => {
    let sampler = null;
    const watch = timeline
      ? [
          ...brokers(ctx.tmp).map((pid) => ({ pid, label: "broker (SSH client)" })),
          ...sshdSessions(ctx.sshdPid).map((pid) => ({ pid, label: "host sshd sessions" })),
        ]
      : [];
    const t0 = performance.now();
    let summary = null;
    const r = await rt
      .op("create", {
        workspaceId,
        options,
        extra: createInput(workspaceId, repo, projectId),
        extraEnv: { PASEO_SSH_PROGRESS: "1" },
        onSpawn: (child) => {
          if (timeline) sampler = startTimeline({ hostMark: rootName, localDirs: [repo.path], rootPid: child.pid, watch, since: t0 });
        },
      })
      .finally(() => {
        summary = sampler ? summariseTimeline(sampler.stop(), t0) : null;
      });
    const marks = {};
    let bytes = null;
    for (const line of r.stderr.split("\n")) {
      if (!line.startsWith("{")) continue;
      try {
        const m = JSON.parse(line);
        if (typeof m.phase === "string" && typeof m.ms === "number") marks[m.phase] = m.ms;
        if (m.phase === "objects-sent" && typeof m.bytes === "number") bytes = m.bytes;
      } catch {
        // not a progress line
      }
    }
    return { ms: r.ms, bytes, marks, timeline: summary };
  };
  /**
   * Waits (at most 60 s) until the host keeps a finished spare checkout of the repository's HEAD
   * and no spare is being written; resolves with the ms waited, or null when none came.
   */
  const spareReady = async (repo, projectId) => {
    const commit = (await git(["rev-parse", "HEAD"], { cwd: repo.path })).trim();
    // This project's object cache only (as src/workspace/create-workspace.ts keys it): an earlier
    // round's project has a spare of the same commit in a cache of its own.
    const top = (await git(["rev-parse", "--show-toplevel"], { cwd: repo.path })).trim();
    const key = createHash("sha256").update(`directory\0${projectId}\0${top}`, "utf8").digest("hex").slice(0, 32);
    const spares = `*/${key}.git/paseo-spares`;
    const probe = `cd ${rootName} && b=$(find . -path '${spares}/.building-*' -prune -print | head -1) && s=$(find . -path '${spares}/${commit}' -prune -print | head -1) && test -z "$b" && test -n "$s"`;
    const t0 = performance.now();
    while (performance.now() - t0 < 60_000) {
      if ((await runCommand("ssh", ssh(probe))).code === 0) return Math.round(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 250));
    }
    log(`${repo.id}: no spare checkout of ${commit} within 60 s`);
    return null;
  };
  const destroy = (workspaceId) => rt.op("destroy", { workspaceId, options }).catch((e) => log(`destroy ${workspaceId}: ${reason(e)}`));

  /**
   * `plan.createSamples` rounds of: the `git archive | ssh tar` reference, a first create (a new
   * project id each round: a cold object cache on a warm host), a second workspace of the same
   * commit; then a no-op re-create and (fixture) a create after a one-file commit. Rows carry the
   * p50; bytes, marks and timeline come from the round whose first create was the median.
   */
  const createSeries = async (repo) => {
    const archives = [];
    const firsts = [];
    const seconds = [];
    const spaced = [];
    const ws = (i, n) => `bench-${net.key}-${repo.id}-${i}-${n}`;
    try {
      for (let i = 0; i < plan.createSamples; i++) {
        const projectId = `bench-${repo.id}-${i}`;
        log(`${repo.id} ${i + 1}/${plan.createSamples}: git archive | ssh tar -x; first create; second workspace`);
        const dir = `${rootName}-archive-${repo.id}-${i}`;
        const quoted = ssh().map((a) => `'${a}'`);
        const r = await runCommand("sh", [
          "-c",
          `git -C '${repo.path}' archive HEAD | ssh ${quoted.join(" ")} 'mkdir -p ${dir} && tar -x -C ${dir}'`,
        ]);
        if (r.code !== 0) throw new Error(`git archive | ssh tar: ${lastLine(r.stderr)}`);
        await runCommand("ssh", ssh(`rm -rf ${dir}`));
        archives.push(r.ms);
        firsts.push(await create(ws(i, 1), repo, { projectId, timeline: true }));
        seconds.push(await create(ws(i, 2), repo, { projectId, timeline: true }));
        // The second workspace took the spare the first left (or waited for it); the daemon writes
        // a new one once creates pause. A workspace made after that shows what a spare saves.
        const waited = await spareReady(repo, projectId);
        if (waited !== null) spaced.push({ ...(await create(ws(i, 4), repo, { projectId, timeline: true })), waitedMs: waited });
        if (i > 0) for (const n of [1, 2]) await destroy(ws(i, n));
        await destroy(ws(i, 4));
      }
      const mid = firsts.indexOf([...firsts].sort((a, b) => a.ms - b.ms)[(firsts.length - 1) >> 1]);
      const row = (what, list) => ({
        shownMs: list[mid].ms,
        ...stats(
          what,
          list.map((x) => x.ms),
        ),
        bytes: list[mid].bytes,
        marks: list[mid].marks,
        timeline: list[mid].timeline,
      });
      const c = {
        label: repo.label,
        archive: stats("git archive HEAD | ssh host tar -x", archives),
        first: row("create, first workspace", firsts),
        second: row("create, second workspace of the same commit", seconds),
      };
      if (spaced.length === firsts.length) {
        c.spaced = row("create, another workspace once the host's spare is ready", spaced);
        c.spaced.waitedMs = stats(
          "wait for the spare",
          spaced.map((x) => x.waitedMs),
        ).p50;
      } else {
        c.spaced = unavailable("create, another workspace once the host's spare is ready", "no spare appeared within 60 s");
      }
      log(`${repo.id}: re-create of a workspace (no-op)`);
      c.noop = await once("create again, same workspace and commit (no-op)", () =>
        create(ws(0, 1), repo, { projectId: `bench-${repo.id}-0` }),
      );
      if (repo.id === "fixture") {
        log(`${repo.id}: create after a one-file commit`);
        c.oneFile = await once("create after a one-file commit", async () => {
          await commitOneFile(repo.path);
          try {
            return await create(ws(0, 3), repo, { projectId: `bench-${repo.id}-0` });
          } finally {
            // The other network path starts from the same commit again.
            await git(["reset", "-q", "--hard", "HEAD~1"], { cwd: repo.path });
          }
        });
      }
      return c;
    } catch (err) {
      return {
        label: repo.label,
        archive: unavailable("git archive HEAD | ssh host tar -x", err),
        first: unavailable("create, first workspace", err),
      };
    } finally {
      for (const n of [1, 2, 3]) await destroy(ws(0, n));
    }
  };

  // A small workspace for the exec rows; creating it also starts the broker and the agent, so the
  // creates below measure a project's first workspace on a host already in use.
  const execWs = `bench-${net.key}-exec`;
  log("create of a one-file workspace (host warm-up)");
  const ready = await once("create, one-file workspace (first contact: broker, SSH, agent install)", async () => {
    const { timeline: _, ...r } = await create(execWs, ctx.repos.tiny);
    return r;
  });
  rows.firstContact = ready;
  const haveWs = !ready.unavailable;
  const noWs = (label) => unavailable(label, `no workspace: ${ready.unavailable}`);

  if (wanted("create")) {
    for (const repo of [ctx.repos.fixture, ctx.repos.realistic]) {
      if (repo) out.creates[repo.id] = await createSeries(repo);
    }
    out.procs.afterCreates = { brokers: brokerSnapshot(), host: host() };
  }

  if (wanted("exec")) {
    log("interleaved latency rounds");
    const ok = (r) => {
      if (r.code !== 0) throw new Error(lastLine(r.stderr));
      return r.ms;
    };
    const execRow = (argv, pty) => async () => {
      if (!haveWs) throw new Error(`no workspace: ${ready.unavailable}`);
      const r = await rt.exec(options, execWs, argv, { pty });
      return { started: r.started, exit: r.exited, ...(r.firstOutput !== null ? { firstOutput: r.firstOutput } : {}) };
    };
    const lat = await interleaved(
      {
        node: { label: "node -e 0 (bare node start-up)", run: async () => ok(await runCommand(process.execPath, ["-e", "0"])) },
        describe: {
          label: "describe (runtime process, no remote work)",
          run: async () => ok(await runCommand(process.execPath, [rt.cli, "describe"], { env: rt.env })),
        },
        execTrue: { label: "exec /bin/true, pipes", run: execRow(["/bin/true"], false) },
        pipesEcho: { label: "exec /bin/echo, pipes", run: execRow(["/bin/echo", "ready"], false) },
        ptyEcho: { label: "exec /bin/echo, PTY", run: execRow(["/bin/echo", "ready"], true) },
      },
      plan.rounds,
      1,
      log,
    );
    Object.assign(rows, lat);
    out.procs.idle = { brokers: brokerSnapshot(), host: host() };

    log("OpenSSH references");
    const controlPath = join(ctx.tmp, `cm-${net.key}`);
    const cm = ["-o", "ControlMaster=auto", "-o", `ControlPath=${controlPath}`, "-o", "ControlPersist=60"];
    rows.controlMaster = await sequential("ssh host true, warm ControlMaster", plan.sshSamples, async () =>
      ok(await runCommand("ssh", ssh(...cm, "true"))),
    );
    await runCommand("ssh", ssh("-o", `ControlPath=${controlPath}`, "-O", "exit"));
    rows.freshSsh = await sequential(
      "ssh host true, fresh connection",
      plan.freshSamples,
      async () => ok(await runCommand("ssh", ssh("true"))),
      0,
    );
  }

  if (wanted("signal")) {
    log("signal");
    rows.signal = haveWs
      ? await sequential("signal SIGKILL of a running exec (runtime process)", plan.signalSamples, async () => {
          const h = rt.startExec(options, execWs, ["/bin/sleep", "30"]);
          const started = await h.started;
          if (started === null) await h.done;
          const r = await runCommand(
            process.execPath,
            [rt.cli, "signal", "--workspace-id", execWs, "--exec-id", h.execId, "--signal", "SIGKILL"],
            {
              input: rt.lifecycleRequest(options),
              env: rt.env,
            },
          );
          const ended = await h.done.catch((e) => (/SIGKILL/.test(e.message) ? null : Promise.reject(e)));
          if (r.code !== 0) throw new Error(`signal exit ${r.code}: ${lastLine(r.stderr)}`);
          if (ended && ended.exit.signal !== "SIGKILL") throw new Error(`exec ended with ${JSON.stringify(ended.exit)}, not SIGKILL`);
          return r.ms;
        })
      : noWs("signal");
  }

  if (wanted("rss")) {
    log(`${plan.liveExecs} live execs`);
    out.live = haveWs
      ? await liveExecs(rt, options, execWs, plan.liveExecs, { brokerSnapshot, host, log, tmp: ctx.tmp })
      : { unavailable: ready.unavailable };
  }

  if (wanted("profile") && haveWs) {
    log("traced execs (profile)");
    out.profiles = await profileExecs(ctx, rt, options, execWs, plan.profileSamples, log, net.delayMs);
  }

  if (wanted("pool")) {
    log("a pool of three hosts against one host entry");
    Object.assign(rows, await benchPool(ctx, net, { rootName, createInput, log }));
  }

  await destroy(execWs);
  out.procs.end = await stopEverything(ctx, rootName, host, log);
  return out;
}

/**
 * Starts `n` execs of `cat` (alive until their input closes) in waves, measures our broker's and
 * the host's processes while all are live, then closes every input and counts clean exits.
 */
async function liveExecs(rt, options, ws, n, { brokerSnapshot, host, log, tmp }) {
  // A fresh broker, so the figure is what live execs cost, whatever ran before (a create's
  // transfer leaves a broker bigger: see "brokers after the creates").
  await terminate(brokers(tmp));
  await rt.exec(options, ws, ["/bin/true"]);
  const before = brokerSnapshot();
  const handles = [];
  const wave = 10;
  const t0 = performance.now();
  let failed = 0;
  for (let i = 0; i < n; i += wave) {
    const batch = Array.from({ length: Math.min(wave, n - i) }, () => rt.startExec(options, ws, ["/bin/cat"], { keepStdin: true }));
    handles.push(...batch);
    const s = await Promise.all(batch.map((h) => h.started));
    failed += s.filter((x) => x === null).length;
  }
  const startMs = performance.now() - t0;
  const during = { brokers: brokerSnapshot(), host: host(), wrapperRssMB: mb(handles.reduce((a, h) => a + rssKb(h.child.pid), 0)) };
  log(`all started in ${Math.round(startMs)} ms; brokers ${JSON.stringify(during.brokers)}, host ${during.host.total} processes`);
  for (const h of handles) h.endInput();
  const ends = await Promise.all(
    handles.map((h) =>
      h.done.then(
        (r) => r.exit,
        (e) => ({ error: reason(e) }),
      ),
    ),
  );
  const clean = ends.filter((e) => e.code === 0).length;
  const errors = [...new Set(ends.filter((e) => e.error).map((e) => e.error))].slice(0, 3);
  return { n, startFailures: failed, startMs: Math.round(startMs), before, during, after: brokerSnapshot(), clean, errors };
}

/**
 * Traced execs and signals: the runtime process runs with the trace hook, and its SSH traffic
 * goes through a proxy of its own (same delay as this path, 0 ms for direct) that records when
 * each chunk crossed the wire, so the broker's part shows without looking inside the broker. The
 * different port means a broker of its own, stopped at the end. Returns median phases.
 */
async function profileExecs(ctx, rt, options, ws, n, log, delayMs) {
  const dir = mkdtempSync(join(ctx.tmp, "trace-"));
  const env = traceEnv(dir);
  const wireLog = join(dir, "wire.jsonl");
  const proxy = await startProxy(ctx.rig.port, delayMs, 15 * 60_000, { log: wireLog });
  appendFileSync(
    ctx.knownHostsFile,
    ctx.rig.hostPublicKeys.map((k) => `[127.0.0.1]:${proxy.port} ${k.split(" ").slice(0, 2).join(" ")}\n`).join(""),
  );
  const traced = { ...options, port: proxy.port };
  const result = {};
  /** Runs `one` n times, then reads the process's trace and the wire records of its lifetime. */
  const sample = async (key, one, phases) => {
    const list = [];
    let last = null;
    try {
      for (let i = 0; i < n; i++) {
        const r = await one();
        // The proxy writes its records out every 100 ms.
        await new Promise((resolve) => setTimeout(resolve, 250));
        const end = r.spawnEpoch + (r.close ?? r.ms);
        last = {
          r,
          cli: takeCliTrace(dir, r.pid),
          wire: wireTrace(wireLog).filter((e) => e.receivedAt >= r.spawnEpoch && e.sentAt <= end),
        };
        list.push(phases(last.r, last.cli, last.wire));
      }
      // One raw trace per row goes into the JSON, for whoever wants to look closer.
      const { stderr: _stderr, ...timing } = last.r;
      result[key] = {
        n,
        phases: medianPhases(list),
        children: childCommands(last.cli),
        example: { ...timing, cli: last.cli, wire: last.wire },
      };
      log(`profile ${key}: done`);
    } catch (err) {
      result[key] = { unavailable: reason(err) };
      log(`profile ${key}: ${reason(err)}`);
    }
  };
  try {
    await rt.exec(traced, ws, ["/bin/true"], { extraEnv: env });
    for (const [key, pty] of [
      ["pipes", false],
      ["pty", true],
    ]) {
      await sample(key, () => rt.exec(traced, ws, ["/bin/date", "+%s%N"], { extraEnv: env, pty }), execPhases);
    }
    await sample(
      "signal",
      async () => {
        const h = rt.startExec(traced, ws, ["/bin/sleep", "30"]);
        if ((await h.started) === null) await h.done;
        const args = [rt.cli, "signal", "--workspace-id", ws, "--exec-id", h.execId, "--signal", "SIGKILL"];
        const r = await runCommand(process.execPath, args, { input: rt.lifecycleRequest(traced), env: rt.withEnv(env) });
        await h.done.catch(() => undefined);
        if (r.code !== 0) throw new Error(`signal exit ${r.code}: ${lastLine(r.stderr)}`);
        return r;
      },
      opPhases,
    );
  } finally {
    await terminate(brokers(ctx.tmp));
    await proxy.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return result;
}

/**
 * Stops this run's brokers (asked to retire their host daemons; SIGTERM for any that does not go;
 * they take their SSH connections with them), then whatever is still
 * on the host under this root after a grace period; reports what had to be killed.
 */
async function stopEverything(ctx, rootName, host, log) {
  const list = brokers(ctx.tmp);
  for (const err of await shutdownBrokers(ctx.tmp)) log(`broker shutdown: ${err}`);
  const brokerKilled = await terminate(list);
  const deadline = Date.now() + 10_000;
  let left = host();
  while (left.agent + left.other > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    left = host();
  }
  const lingering = left.agent + left.other;
  if (lingering > 0) {
    log(`${lingering} host process(es) still under ${rootName} 10 s after the brokers stopped; killing them`);
    await terminate(hostProcesses(null, rootName).pids);
  }
  return { brokersStopped: list.length, brokersKilled: brokerKilled.length, hostLingering: lingering };
}
