// Notices the broker does not act on itself but hands to the runtime's executable: for a kind
// registered here, each change of a key runs `node dist/cli.js <operation>` with
// `{options, target, notice}` on stdin (the broker's options, its own socket to connect back
// through, and the notice). The live mirror is the first such kind ("work": a workspace's refs
// moved; the `work-notice` operation brings the commits back, src/mirror/). The broker thus stays
// ignorant of what a key means, and the code that writes into the user's repository runs in a
// process of its own, with the runtime's code and bounds, not in the long-lived broker.
//
// Per key at most one run at a time; a change that arrives meanwhile is run after it (only the
// newest). At most MAX_RUNNING runs at once. A run that fails is tried again after a backoff while
// its key holds the same notice; one that succeeded is not run again for the same notice, so a
// reconnect's snapshot costs nothing when nothing moved. While runs are going or queued the
// broker does not idle out (hold()).
//
// The host's asks of a topic registered with `answerAsks` are handed off the same way, one run per
// ask: `{options, target, ask}` on stdin, and the operation's stdout (one JSON value) is the
// answer (git credentials: the `git-credential` operation). Its stdout goes nowhere else: it may
// hold a secret, so it is neither logged nor kept.
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import type { HostAskTopic, Notice, NoticeKind } from "../../shared/agent-api.js";
import { oneLine } from "../../shared/errors.js";
import { parseJson } from "../../shared/guards.js";
import type { NoticeRegistry } from "./notices.js";

const MAX_RUNNING = 2;
/** One run's bound: the operation has its own, this only reaps a stuck process. */
const RUN_TIMEOUT_MS = 15 * 60_000;
const RETRY_FIRST_MS = 5_000;
const RETRY_MAX_MS = 5 * 60_000;
const STDERR_KEEP = 2000;
/** An answer larger than this is no answer. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface HandOffContext {
  /** The runtime executable's entry (dist/cli.js beside dist/broker.js). */
  cli: string;
  /** What the operation reads on stdin besides the notice. */
  input: Record<string, unknown>;
  log(line: string): void;
  /** Environment of the runs (the broker's own). */
  env?: NodeJS.ProcessEnv;
}

/** dist/cli.js, next to the dist/broker.js this broker was started as. */
export function cliBeside(brokerScript: string): string {
  return join(dirname(brokerScript), "cli.js");
}

interface KeyState {
  /** The newest notice not yet run (null: nothing to do). */
  next: Notice | null;
  running: boolean;
  /** The key went away (its workspace was removed): forgotten once its run ends. */
  gone: boolean;
  /** The text of the notice last run successfully. */
  done: string | null;
  retryMs: number;
  timer?: NodeJS.Timeout;
}

export class HandOff {
  private readonly keys = new Map<string, KeyState>();
  private running = 0;
  private readonly waiting: string[] = [];
  private release: (() => void) | null = null;
  private stopped = false;

  constructor(
    private readonly registry: NoticeRegistry,
    readonly kind: NoticeKind,
    private readonly operation: string,
    private readonly ctx: HandOffContext,
  ) {
    registry.onNotice(kind, (n) => this.take(n), undefined, { keepsAlive: false });
  }

  /** Runs going or queued (tests, stats). */
  get pending(): number {
    return this.running + this.waiting.length;
  }

  stop(): void {
    this.stopped = true;
    for (const k of this.keys.values()) clearTimeout(k.timer);
    this.keys.clear();
    this.waiting.length = 0;
    this.updateHold();
  }

  private take(n: Notice): void {
    if (this.stopped) return;
    if (n.gone) {
      const k = this.keys.get(n.key);
      if (k) {
        clearTimeout(k.timer);
        k.next = null;
        k.gone = true;
        if (!k.running) this.keys.delete(n.key);
      }
      return;
    }
    const known = this.keys.get(n.key);
    const k = known && !known.gone ? known : { next: null, running: false, gone: false, done: null, retryMs: RETRY_FIRST_MS };
    this.keys.set(n.key, k);
    if (JSON.stringify(n) === k.done) return;
    clearTimeout(k.timer);
    k.retryMs = RETRY_FIRST_MS;
    k.next = n;
    this.enqueue(n.key);
  }

  private enqueue(key: string): void {
    const k = this.keys.get(key);
    if (!k || k.gone || k.running || !k.next || this.waiting.includes(key)) return;
    this.waiting.push(key);
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.running < MAX_RUNNING && this.waiting.length > 0) {
      const key = this.waiting.shift()!;
      const k = this.keys.get(key);
      if (!k?.next || k.running) continue;
      const notice = k.next;
      k.next = null;
      k.running = true;
      this.running++;
      void this.run(notice).then((ok) => {
        this.running--;
        k.running = false;
        const text = JSON.stringify(notice);
        if (k.gone) {
          if (this.keys.get(key) === k) this.keys.delete(key);
        } else if (ok) {
          k.done = text;
          k.retryMs = RETRY_FIRST_MS;
        } else if (k.next === null) {
          // Tried again later while the key still holds this notice.
          k.timer = setTimeout(() => {
            if (k.next === null && k.done !== text) {
              k.next = notice;
              this.enqueue(key);
            }
          }, k.retryMs).unref();
          k.retryMs = Math.min(k.retryMs * 2, RETRY_MAX_MS);
        }
        this.enqueue(key);
        this.pump();
        this.updateHold();
      });
    }
    this.updateHold();
  }

  /** While anything runs or waits, the broker stays up (it is also what the runs connect through). */
  private updateHold(): void {
    const busy = this.pending > 0;
    if (busy && !this.release) this.release = this.registry.hold();
    else if (!busy && this.release) {
      this.release();
      this.release = null;
    }
  }

  private async run(notice: Notice): Promise<boolean> {
    const label = `${this.operation} ${JSON.stringify(notice.key)}`;
    return (await runOperation(this.ctx, this.operation, { ...this.ctx.input, notice }, label, RUN_TIMEOUT_MS, "tried again later")).ok;
  }
}

/**
 * Runs `node <cli> <operation>` with `input` on stdin, bounded by `timeoutMs` (then killed); its
 * stderr goes to the broker's log under `label`, its stdout (at most MAX_ANSWER_BYTES) to the caller.
 */
function runOperation(
  ctx: HandOffContext,
  operation: string,
  input: Record<string, unknown>,
  label: string,
  timeoutMs: number,
  onFailure: string,
): Promise<{ ok: boolean; stdout: Buffer }> {
  return new Promise((resolve) => {
    let stderr = "";
    const out: Buffer[] = [];
    let outBytes = 0;
    const child = spawn(process.execPath, [ctx.cli, operation], { stdio: ["pipe", "pipe", "pipe"], env: ctx.env ?? process.env });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout.on("data", (d: Buffer) => {
      outBytes += d.length;
      if (outBytes <= MAX_ANSWER_BYTES) out.push(d);
    });
    child.stderr.on("data", (d: Buffer) => (stderr = (stderr + d.toString("utf8")).slice(-STDERR_KEEP)));
    child.stdin.on("error", () => undefined);
    child.stdin.end(JSON.stringify(input));
    child.on("error", (err) => {
      clearTimeout(timer);
      ctx.log(`${label} could not start: ${oneLine(err.message)}`);
      resolve({ ok: false, stdout: Buffer.alloc(0) });
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const said = oneLine(stderr.trim());
      if (said) ctx.log(`${label}: ${said}`);
      if (code !== 0) ctx.log(`${label} failed (${signal ?? code}); ${onFailure}`);
      resolve({ ok: code === 0 && outBytes <= MAX_ANSWER_BYTES, stdout: Buffer.concat(out) });
    });
  });
}

/**
 * The host's asks of `topic` answered by the runtime's `operation`, one run each (bounded by
 * `timeoutMs`): the JSON value it prints is the answer; a failed run answers null.
 */
export function answerAsks(registry: NoticeRegistry, topic: HostAskTopic, operation: string, ctx: HandOffContext, timeoutMs: number): void {
  registry.onAsk(topic, async (ask) => {
    const r = await runOperation(ctx, operation, { ...ctx.input, ask }, `${operation} (an ask of the host)`, timeoutMs, "answered nothing");
    return r.ok ? (parseJson(r.stdout) ?? null) : null;
  });
}
