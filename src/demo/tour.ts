// The demo's tour: one workspace taken through its whole life by spawning the runtime executable
// exactly as Paseo would (driver.ts), each step checked and printed on one line with its time.
// Whatever happens, the workspace is destroyed at the end.
import { randomBytes } from "node:crypto";
import type { Writable } from "node:stream";
import type { DemoSource } from "./source-repo.js";
import { execWorkload, runWorkload, spawnOp, type RuntimeCommand, type SpawnEnvelope } from "./runtime-driver.js";
import { sleep } from "../shared/async.js";

export interface TourTarget {
  cmd: RuntimeCommand;
  options: Record<string, string | number>;
  source: DemoSource;
  /** False when the server cannot allocate PTYs (embedded server without util-linux script). */
  ptyAvailable: boolean;
  /** Checked between steps: once true, the remaining steps are skipped but destroy still runs. */
  interrupted?: () => boolean;
}

type Outcome = { status: "pass" | "skip"; detail: string };
interface Step {
  name: string;
  run(): Promise<Outcome>;
  /** Later steps make no sense once this one failed. */
  required?: boolean;
}

const DESCRIBE_BYTES = '{"protocolVersion":1,"modes":["pipes","pty"],"reconcile":true}\n';
const PATH = "/usr/local/bin:/usr/bin:/bin";
const PTY_WAIT_MS = 10_000;

class Check extends Error {}
function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Check(message);
}
const pass = (detail: string): Outcome => ({ status: "pass", detail });

function show(bytes: Buffer | string, max = 60): string {
  const text = JSON.stringify(bytes.toString());
  return text.length > max ? `${text.slice(0, max)}…"` : text;
}

/** Which way the host gave the PTY exec its terminal, from the command line of the workload's parent. */
export function terminalOwner(output: string): string {
  if (/terminal-relay\.py/.test(output)) return "terminal owned by the host daemon (python3)";
  if (/terminal-script-child\.cjs/.test(output)) return "terminal owned by the host daemon (util-linux script)";
  if (/ pty-attach /.test(output)) return "terminal owned by sshd (the host has neither python3 nor util-linux script)";
  return "terminal owner unknown";
}

export interface TourTotals {
  passed: number;
  failed: number;
  skipped: number;
}

/** One line per step: mark, name, elapsed time since `started` (performance.now()), detail. */
export function reportStep(out: Writable, name: string, mark: string, started: number, detail: string): void {
  const ms = Math.round(performance.now() - started);
  out.write(`  ${mark} ${name.padEnd(22)} ${`${ms} ms`.padStart(8)}  ${detail}\n`);
}

export async function runTour(target: TourTarget, out: Writable): Promise<TourTotals> {
  const { cmd, options, source } = target;
  const workspaceId = `paseo-demo-${randomBytes(6).toString("hex")}`;
  const runtimeInstanceId = randomBytes(32).toString("hex");
  const request = { protocolVersion: 1 as const, runtimeInstanceId, options };
  const ws = { "workspace-id": workspaceId };
  const lifecycle = async (op: string, extra: object = {}) =>
    (await spawnOp(cmd, op, ws, { ...request, ...extra })).response as Record<string, any>;
  const inspect = async () => (await lifecycle("inspect")).inspection as Record<string, any>;
  const envelope = (argv: string[], env: Record<string, string>, extra: Partial<SpawnEnvelope> = {}): SpawnEnvelope => ({
    type: "spawn",
    protocolVersion: 1,
    runtimeInstanceId,
    argv,
    env,
    purpose: { kind: "terminal" },
    options,
    execId: randomBytes(16).toString("hex"),
    stdio: { kind: "pipes" },
    ...extra,
  });
  const run = (argv: string[], env: Record<string, string>, extra: Partial<SpawnEnvelope> = {}) =>
    runWorkload(cmd, workspaceId, envelope(argv, env, extra));
  const helper = (args: string[]) => run(["paseo-workspace-helper", ...args], {}, { purpose: { kind: "workspace-helper" } });
  let remoteRoot = "";

  const steps: Step[] = [
    {
      name: "describe",
      required: true,
      async run() {
        const { stdout } = await spawnOp(cmd, "describe", {}, undefined);
        check(stdout === DESCRIBE_BYTES, `unexpected describe output ${show(stdout, 120)}`);
        return pass("protocol 1, modes pipes+pty, reconcile");
      },
    },
    {
      name: "create",
      required: true,
      async run() {
        source.placeUntracked();
        let response: Record<string, any>;
        try {
          response = await lifecycle("create", {
            input: {
              workspaceId,
              project: { projectId: "paseo-demo", source: { kind: "directory", path: source.path } },
              placement: { kind: "existing" },
            },
          });
        } finally {
          source.cleanup();
        }
        check(response.type === "state" && response.state.lifecycle === "ready", `create answered ${JSON.stringify(response)}`);
        check(response.materializedFreshContent === true, "create did not report fresh content");
        remoteRoot = response.placement.cwd;
        const inspection = await inspect();
        check(inspection.status === "ready", `inspect says ${inspection.status} after create`);
        const origin = source.generated ? "generated sample repo" : source.path;
        return pass(`${workspaceId} from ${origin} (${source.branch}@${source.head.slice(0, 7)}) at ${remoteRoot}`);
      },
    },
    {
      name: "committed files only",
      async run() {
        const script = 'test -f "$1" && test ! -e "$2"';
        const result = await run(["/bin/sh", "-c", script, "sh", source.committedFile, source.untrackedFile], {});
        check(
          result.code === 0,
          `expected ${source.committedFile} present and ${source.untrackedFile} absent (exit ${result.code ?? result.signal})`,
        );
        return pass(`${source.committedFile} present, untracked ${source.untrackedFile} absent`);
      },
    },
    {
      name: "git log -1",
      async run() {
        const result = await run(["git", "log", "-1", "--format=%H %s"], { PATH }, { purpose: { kind: "git" } });
        check(result.code === 0, `git failed (${result.code ?? result.signal}): ${show(result.stderr)}`);
        const line = result.stdout.toString().trim();
        check(line.startsWith(`${source.head} `), `remote HEAD is ${show(line)}, expected ${source.head}`);
        return pass(`remote HEAD ${line.slice(0, 7)} "${line.slice(41, 81)}" matches local`);
      },
    },
    {
      name: "exact env",
      async run() {
        const result = await run(["/usr/bin/env"], { PASEO_DEMO_EXACT_ENV: "ssh" });
        check(result.code === 0 && result.stdout.toString() === "PASEO_DEMO_EXACT_ENV=ssh\n", `env printed ${show(result.stdout, 200)}`);
        return pass("/usr/bin/env saw exactly PASEO_DEMO_EXACT_ENV=ssh");
      },
    },
    {
      name: "pty",
      async run() {
        if (!target.ptyAvailable)
          return { status: "skip", detail: "this machine cannot allocate PTYs for the embedded server (util-linux script missing)" };
        const handle = execWorkload(
          cmd,
          workspaceId,
          envelope(
            // The terminal's owner is the workload's parent: it tells which way this host gives PTY execs a terminal.
            ["/bin/sh", "-c", "stty size; test -t 0 && echo is-a-tty; read line; stty size; tr '\\0' ' ' </proc/$PPID/cmdline; exit 7"],
            { PATH },
            {
              stdio: { kind: "pty", rows: 24, cols: 80 },
            },
          ),
        );
        // Bounded, and a failed exec surfaces its own message rather than a timeout.
        await Promise.race([handle.started, handle.exited, sleep(PTY_WAIT_MS)]);
        await until(
          () => /24 80/.test(handle.stdout().toString()),
          PTY_WAIT_MS,
          `no initial size from the PTY (events: ${
            handle
              .events()
              .map((e) => e.type)
              .join(",") || "none"
          })`,
        );
        await handle.resize(30, 100);
        handle.stdin.write("go\n");
        const exit = await handle.exited;
        const output = handle.stdout().toString();
        check(exit.code === 7 && exit.signal === null, `PTY exit ${JSON.stringify(exit)}`);
        check(/is-a-tty/.test(output) && /30 100/.test(output), `PTY output ${show(output, 120)}`);
        return pass(`isatty, 80x24 at start, resize to 100x30 acknowledged and seen, exit 7; ${terminalOwner(output)}`);
      },
    },
    {
      name: "workspace helper",
      async run() {
        const stat = await helper(["fs-stat", "--path", source.committedFile]);
        check(stat.code === 0, `fs-stat failed: ${show(stat.stderr)}`);
        const info = JSON.parse(stat.stdout.toString()) as { status: string; size: number };
        check(info.status === "ready" && info.size === source.committedBytes.length, `fs-stat said ${show(stat.stdout, 120)}`);
        const read = await helper(["fs-read", "--path", source.committedFile]);
        check(
          read.code === 0 && read.stdout.equals(source.committedBytes),
          `fs-read returned ${read.stdout.length} bytes that differ from HEAD`,
        );
        return pass(`fs-stat ${source.committedFile}: ready, ${info.size} bytes; fs-read: identical to HEAD (env {})`);
      },
    },
    {
      name: "pause",
      required: true,
      async run() {
        const response = await lifecycle("pause");
        check(response.type === "ok", `pause answered ${JSON.stringify(response)}`);
        const inspection = await inspect();
        check(inspection.status === "paused", `inspect says ${inspection.status} after pause`);
        const refused = await run(["/bin/true"], {}).then(
          () => "ran",
          (err: Error) => err.message,
        );
        check(refused.includes(`SSH workspace is paused: ${workspaceId}`), `exec while paused: ${refused}`);
        return pass("inspect: paused; exec refused while paused");
      },
    },
    {
      name: "resume",
      required: true,
      async run() {
        const response = await lifecycle("resume");
        check(response.type === "state" && response.state.lifecycle === "ready", `resume answered ${JSON.stringify(response)}`);
        check(!("materializedFreshContent" in response), "resume must not report materializedFreshContent");
        const result = await run(["/bin/sh", "-c", 'test -f "$1"', "sh", source.committedFile], {});
        check(result.code === 0, "workspace content missing after resume");
        return pass("ready again; content intact");
      },
    },
  ];

  const cleanupStep: Step = {
    name: "destroy",
    async run() {
      const response = await lifecycle("destroy");
      check(response.type === "ok", `destroy answered ${JSON.stringify(response)}`);
      const inspection = await inspect();
      check(inspection.status === "missing", `inspect says ${inspection.status} after destroy`);
      return pass("ok; inspect: missing");
    },
  };

  const totals: TourTotals = { passed: 0, failed: 0, skipped: 0 };
  const report = (name: string, mark: string, started: number, detail: string) => reportStep(out, name, mark, started, detail);
  let blocked: string | undefined;
  let createAttempted = false;
  for (const step of [...steps, cleanupStep]) {
    const isCleanup = step === cleanupStep;
    if (target.interrupted?.()) blocked ??= "interrupt";
    if (blocked && !(isCleanup && createAttempted)) {
      totals.skipped++;
      report(step.name, "-", performance.now(), blocked === "interrupt" ? "skipped: interrupted" : `skipped: ${blocked} failed`);
      continue;
    }
    if (step.name === "create") createAttempted = true;
    const started = performance.now();
    try {
      const outcome = await step.run();
      totals[outcome.status === "pass" ? "passed" : "skipped"]++;
      report(step.name, outcome.status === "pass" ? "✓" : "-", started, outcome.detail);
    } catch (err) {
      totals.failed++;
      report(step.name, "✗", started, err instanceof Error ? err.message : String(err));
      if (step.required) blocked ??= step.name;
    }
  }
  return totals;
}

async function until(done: () => boolean, timeoutMs: number, message: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Check(message);
    await sleep(20);
  }
}
