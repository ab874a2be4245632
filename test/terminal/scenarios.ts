// Terminal scenarios shared by the in-process tests and harness.ts (the same code run in a child
// node, as root or as the rig's non-root user): output collection, the A21 size probe, a held
// terminal for controller-death tests, and a 100 MB echo with memory figures.
import { createHash } from "node:crypto";
import { chmodSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  spawnTerminal,
  type Terminal,
  type TerminalExit,
  type TerminalSpec,
  type UsableTerminalSupport,
} from "../../src/remote-agent/terminal/host-terminals.js";

/** Scenario A21's size probe, verbatim. */
export const SIZE_PROBE =
  "process.stdin.setEncoding('utf8');process.stdout.write(`${process.cwd()}|${process.stdout.isTTY}|${process.stdout.columns}x${process.stdout.rows}|λ`);process.stdin.once('data',data=>{process.stdout.write(`|${data.trim()}|${process.stdout.columns}x${process.stdout.rows}`);process.exit(6)})";

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const scratchDirs: string[] = [];

/** A fresh temp directory, by its real path; removed by removeScratch(). */
export function scratch(label: string): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), `paseo-terminal-${label}-`)));
  scratchDirs.push(dir);
  return dir;
}

export function removeScratch(): void {
  for (const dir of scratchDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** A search path holding only util-linux script and stty: the probe cannot see python3. */
export function scriptOnlyPath(): string {
  const bin = scratch("bin");
  chmodSync(bin, 0o755);
  symlinkSync("/usr/bin/script", join(bin, "script"));
  symlinkSync("/usr/bin/stty", join(bin, "stty"));
  return bin;
}

export interface Collected {
  bytes(): Buffer;
  text(): string;
  /** Resolves once the output contains `text`; rejects with what arrived after `ms`. */
  wait(text: string, ms?: number): Promise<string>;
  /** Resolves with the first match of `re` in the output. */
  match(re: RegExp, ms?: number): Promise<RegExpExecArray>;
}

export function collect(t: Terminal): Collected {
  const chunks: Buffer[] = [];
  t.output.on("data", (d: Buffer) => chunks.push(d));
  const bytes = () => Buffer.concat(chunks);
  const text = () => bytes().toString("utf8");
  const match = async (re: RegExp, ms = 10_000) => {
    const deadline = Date.now() + ms;
    for (;;) {
      const m = re.exec(text());
      if (m) return m;
      if (Date.now() > deadline) throw new Error(`no ${String(re)} in output: ${JSON.stringify(text().slice(-500))}`);
      await sleep(10);
    }
  };
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return { bytes, text, match, wait: async (needle, ms) => (await match(new RegExp(escape(needle)), ms)).input };
}

/** A spec with defaults: 80x24, empty env, cwd /. */
export function spec(file: string, args: string[], extra: Partial<TerminalSpec> = {}): TerminalSpec {
  return { file, args, argv0: file, cwd: "/", env: {}, rows: 24, cols: 80, ...extra };
}

export interface A21Result {
  beforeInput: string;
  resized: boolean;
  output: string;
  exit: TerminalExit;
}

export async function runA21(support: UsableTerminalSupport, cwd: string): Promise<A21Result> {
  const t = await spawnTerminal(
    support,
    spec(process.execPath, ["-e", SIZE_PROBE], { cwd, env: { PATH: "/usr/local/bin:/usr/bin:/bin" } }),
  );
  const out = collect(t);
  const beforeInput = await out.wait(`${cwd}|true|80x24|λ`);
  const resized = await t.resize(39, 103);
  t.input.write("héllo\n");
  const exit = await t.exited;
  return { beforeInput, resized, output: out.text(), exit };
}

/** Every process whose fd 47 is open on `tagPath`. */
export function tagHolders(tagPath: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/fd/47`) === tagPath) out.push(Number(name));
    } catch {
      // no fd 47, or gone
    }
  }
  return out;
}

/** Cleanup after a failed assertion: SIGKILLs whatever still holds the tag. */
export function killTagHolders(tagPath: string): void {
  for (const pid of tagHolders(tagPath)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
}

export function alive(pid: number): boolean {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]![0];
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/** Peak resident set (VmHWM) of a process, in KiB. */
export function peakRssKb(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : NaN;
}

/** Deterministic, non-periodic test bytes: chunk i of a fixed pseudo-random stream. */
export function patternChunk(i: number, size = 65536): Buffer {
  const buf = Buffer.allocUnsafe(size);
  let x = (i * 2654435761) ^ 0x9e3779b9;
  for (let j = 0; j < size; j += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    buf.writeInt32LE(x | 0, j);
  }
  return buf;
}

export interface EchoResult {
  bytes: number;
  sentSha: string;
  echoedSha: string;
  echoedBytes: number;
  ms: number;
  relayPeakKb: number;
  driverPeakKb: number;
  exit: TerminalExit;
}

/** `cat` on a raw terminal: `total` bytes in, the same bytes out, both with backpressure. */
export async function echoThrough(support: UsableTerminalSupport, total: number): Promise<EchoResult> {
  const t = await spawnTerminal(
    support,
    spec("/bin/sh", ["-c", "stty raw -echo && echo ready && exec cat"], { env: { PATH: "/usr/bin:/bin" } }),
  );
  const marker = Buffer.from("ready\n");
  let head: Buffer | null = Buffer.alloc(0); // output before the marker; null once found
  let echoed = 0;
  const echoedHash = createHash("sha256");
  let onAll: () => void = () => undefined;
  const all = new Promise<void>((r) => (onAll = r));
  let onReady: () => void = () => undefined;
  const ready = new Promise<void>((r) => (onReady = r));
  t.output.on("data", (d: Buffer) => {
    if (head) {
      head = Buffer.concat([head, d]);
      const at = head.indexOf(marker);
      if (at < 0) return;
      d = head.subarray(at + marker.length);
      head = null;
      onReady();
    }
    echoed += d.length;
    echoedHash.update(d);
    if (echoed >= total) onAll();
  });
  await ready;
  const started = performance.now();
  const sentHash = createHash("sha256");
  const size = 65536;
  for (let i = 0, sent = 0; sent < total; i++) {
    const chunk = patternChunk(i, Math.min(size, total - sent));
    sentHash.update(chunk);
    sent += chunk.length;
    if (!t.input.write(chunk)) await once(t.input, "drain");
  }
  await all;
  const ms = performance.now() - started;
  const relayPeakKb = peakRssKb(t.relayPid);
  await t.close();
  return {
    bytes: total,
    sentSha: sentHash.digest("hex"),
    echoedSha: echoedHash.digest("hex"),
    echoedBytes: echoed,
    ms,
    relayPeakKb,
    driverPeakKb: process.resourceUsage().maxRSS,
    exit: await t.exited,
  };
}
