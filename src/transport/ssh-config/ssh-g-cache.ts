// Remembers `ssh -G` answers between runtime processes. Every operation that reaches a host needs
// the evaluated ssh_config to key its broker, and spawning ssh for it is a measurable part of the
// per-operation floor. An answer is reused only while everything ssh read to produce it is
// unchanged: each config file (Included ones too, and the directory a glob Include lists) by its
// stat identity, the ssh binary, the environment variables the files name and the local identity,
// so an edit to ~/.ssh/config applies to the very next operation. Configs whose answer can change
// without any of that changing (Match exec, Match localnetwork, DNS canonicalisation, tokens in an
// Include path) are never remembered. Entries live in a private directory the caller vouches for.
import { lstatSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync, type BigIntStats } from "node:fs";
import { dirname, basename, isAbsolute, join } from "node:path";
import type { Dump } from "./dump.js";
import { matchPattern } from "./pattern.js";
import { SYSTEM_CONFIG, runSshG, type EvalRequest } from "./ssh-g.js";
import type { LocalIdentity } from "./tokens.js";
import { sha256Hex } from "../../shared/sha256.js";

/** OpenSSH's own limit on nested Include levels. */
const MAX_DEPTH = 16;
/** On a file system with whole-second times, an edit this soon after a file's mtime may not show. */
const COARSE_CLOCK_NS = 2_000_000_000n;

/** What ssh read for one answer: each path's stat identity (null: absent) and named variables. */
interface Inputs {
  files: Map<string, string | null>;
  env: Set<string>;
  /** False when the answer may depend on something no stat shows. */
  cacheable: boolean;
  /** A file changed so recently that a same-timestamp edit could still go unseen. */
  recent: boolean;
}

interface Entry {
  key: string;
  files: Array<[string, string | null]>;
  env: Array<[string, string | null]>;
  dump: Array<[string, string[]]>;
}

function stat(path: string): BigIntStats | null {
  try {
    return statSync(path, { bigint: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw err;
  }
}

function identityOf(st: BigIntStats | null): string | null {
  return st && `${st.dev}:${st.ino}:${st.mode}:${st.uid}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

/** The keyword and arguments of one config line (OpenSSH's `keyword [=] args`, quotes grouping). */
function splitLine(line: string): { keyword: string; args: string[] } | null {
  const text = line.trim();
  if (text === "" || text.startsWith("#")) return null;
  const m = /^(\S+?)(?:\s*=\s*|\s+|$)(.*)$/.exec(text);
  if (!m) return null;
  const args = [...m[2]!.matchAll(/"([^"]*)"|(\S+)/g)].map((a) => a[1] ?? a[2]!);
  return { keyword: m[1]!.toLowerCase(), args };
}

/**
 * Whether a Match line names a criterion decided at run time. OpenSSH splits a Match line on `=`
 * and quotes as well as whitespace (`exec=cmd`, `!exec"cmd"`), so any word `exec` or `localnetwork`
 * in it counts; a host or user pattern that happens to be that word only costs a cache miss.
 */
function mentionsRuntimeCriterion(args: string[]): boolean {
  return /(^|[^a-z0-9_-])(exec|localnetwork)($|[^a-z0-9_-])/i.test(args.join(" "));
}

class Scan implements Inputs {
  files = new Map<string, string | null>();
  env = new Set<string>();
  cacheable = true;
  recent = false;
  private readonly now = BigInt(Date.now()) * 1_000_000n;

  constructor(private readonly local: LocalIdentity) {}

  private record(path: string): BigIntStats | null {
    const st = stat(path);
    this.files.set(path, identityOf(st));
    // Whole-second times: an edit within the same second as the recorded one would not show.
    if (st && st.mtimeNs % 1_000_000_000n === 0n && this.now - st.mtimeNs < COARSE_CLOCK_NS) this.recent = true;
    return st;
  }

  /** Records a config file (stat first, then its text: an edit in between only causes a miss). */
  file(path: string, config: "user" | "system", depth: number): void {
    if (!this.cacheable) return;
    if (depth > MAX_DEPTH || this.files.has(path)) {
      this.cacheable = depth <= MAX_DEPTH;
      return;
    }
    if (!this.record(path)) return;
    const text = readFileSync(path, "utf8");
    for (const name of text.matchAll(/\$\{([^}]*)\}/g)) this.env.add(name[1]!);
    for (const raw of text.split("\n")) {
      const line = splitLine(raw);
      if (!line) continue;
      if (line.keyword === "match" && mentionsRuntimeCriterion(line.args)) this.cacheable = false;
      if (line.keyword === "include") for (const arg of line.args) this.include(arg, config, depth);
    }
  }

  private include(arg: string, config: "user" | "system", depth: number): void {
    if (/[%$]/.test(arg) || (arg.startsWith("~") && !arg.startsWith("~/"))) {
      this.cacheable = false;
      return;
    }
    const path = arg.startsWith("~/")
      ? join(this.local.home, arg.slice(2))
      : isAbsolute(arg)
        ? arg
        : join(config === "user" ? join(this.local.home, ".ssh") : dirname(SYSTEM_CONFIG), arg);
    if (!/[*?[]/.test(path)) return this.file(path, config, depth + 1);
    const dir = dirname(path);
    const pattern = basename(path);
    // Only `*` and `?` in the last component are followed; anything richer is not remembered.
    if (/[*?[]/.test(dir) || pattern.includes("[")) {
      this.cacheable = false;
      return;
    }
    // The directory's identity changes whenever an entry is added, removed or renamed.
    if (!this.record(dir)) return;
    for (const name of readdirSync(dir).sort()) if (matchPattern(name, pattern)) this.file(join(dir, name), config, depth + 1);
  }
}

/** The files ssh reads for `req` (the -F file, or ~/.ssh/config then the system file) and what they include. */
export function scanInputs(req: EvalRequest, local: LocalIdentity): Inputs {
  const scan = new Scan(local);
  try {
    if (req.file !== null) scan.file(req.file, "user", 0);
    else {
      scan.file(join(local.home, ".ssh", "config"), "user", 0);
      scan.file(SYSTEM_CONFIG, "system", 0);
    }
  } catch {
    // Unreadable or odd: let ssh -G speak for it, every time.
    scan.cacheable = false;
  }
  return scan;
}

function cacheKey(ssh: string, req: EvalRequest, local: LocalIdentity): string {
  return JSON.stringify({ v: 1, ssh, binary: identityOf(stat(ssh)), req, local });
}

function entryPath(dir: string, key: string): string {
  return join(dir, `ssh-g-${sha256Hex(key).slice(0, 24)}.json`);
}

function readEntry(path: string, key: string): Dump | null {
  try {
    const st = lstatSync(path);
    if (!st.isFile() || st.uid !== (process.getuid?.() ?? 0) || (st.mode & 0o077) !== 0) return null;
    const entry = JSON.parse(readFileSync(path, "utf8")) as Entry;
    if (entry.key !== key) return null;
    for (const [file, id] of entry.files) if (identityOf(stat(file)) !== id) return null;
    for (const [name, value] of entry.env) if ((process.env[name] ?? null) !== value) return null;
    return new Map(entry.dump);
  } catch {
    return null;
  }
}

function writeEntry(path: string, entry: Entry): void {
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, JSON.stringify(entry), { mode: 0o600 });
    renameSync(tmp, path);
  } catch {
    // Best effort: the next operation asks ssh again.
    rmSync(tmp, { force: true });
  }
}

/**
 * `ssh -G` for `req`, answered from `dir` while nothing it depends on has changed. The inputs are
 * recorded before ssh runs, so an edit racing with it makes the entry miss rather than go stale.
 */
export async function cachedSshG(ssh: string, req: EvalRequest, local: LocalIdentity, dir: string): Promise<Dump> {
  const key = cacheKey(ssh, req, local);
  const path = entryPath(dir, key);
  const hit = readEntry(path, key);
  if (hit) return hit;
  const inputs = scanInputs(req, local);
  const dump = await runSshG(ssh, req);
  const canonicalises = (dump.get("canonicalizehostname")?.[0] ?? "false") !== "false";
  if (inputs.cacheable && !inputs.recent && !canonicalises) {
    writeEntry(path, {
      key,
      files: [...inputs.files],
      env: [...inputs.env].map((name) => [name, process.env[name] ?? null]),
      dump: [...dump],
    });
  }
  return dump;
}
