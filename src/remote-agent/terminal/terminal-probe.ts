// Which way this host can own a terminal: python3 running relay.py, util-linux `script` with our
// node child and `stty`, or none (the caller keeps sshd's pty). Probed for real once (a pty is
// opened and sized), then cached in the agent directory keyed by the programs found, so a later
// call costs a few stat calls; installing or removing one of them changes the key.
import { accessSync, constants, existsSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { oneLine } from "../../shared/errors.js";
import { installTerminalFiles, sourcesHash } from "./sources.js";

export type TerminalSupport =
  | { method: "python3"; python: string; version: string; relay: string }
  | { method: "script"; script: string; stty: string; node: string; scriptChild: string }
  | { method: "none"; reason: string };

export type UsableTerminalSupport = Exclude<TerminalSupport, { method: "none" }>;

export interface ProbeOptions {
  /** Directories searched for python3 / platform-python, script and stty (default: PATH + usual dirs). */
  searchPath?: string;
  /** Node that runs the `script` method's child (default: this process's node). */
  nodePath?: string;
}

const CACHE_FILE = "terminal-support.json";
const PROBE_TIMEOUT_MS = 5000;
/** A "none" caused by a failure (not by absence) may be transient: probed again after this. */
const NONE_TTL_MS = 10 * 60_000;

interface Found {
  python: string | null;
  script: string | null;
  stty: string | null;
  node: string;
}

interface CacheEntry {
  key: string;
  support: TerminalSupport;
  probedAt: number;
}

const memo = new Map<string, CacheEntry>();

function defaultSearchPath(): string {
  return [process.env.PATH ?? "", "/usr/local/bin:/usr/bin:/bin:/usr/libexec"].filter(Boolean).join(":");
}

function findProgram(names: string[], searchPath: string): string | null {
  for (const name of names) {
    for (const dir of searchPath.split(":")) {
      if (!dir.startsWith("/")) continue;
      const path = join(dir, name);
      try {
        if (!statSync(path).isFile()) continue;
        accessSync(path, constants.X_OK);
        return path;
      } catch {
        // not here
      }
    }
  }
  return null;
}

function readCache(agentDir: string): CacheEntry | null {
  try {
    const entry = JSON.parse(readFileSync(join(agentDir, CACHE_FILE), "utf8")) as CacheEntry;
    return typeof entry.key === "string" && typeof entry.support?.method === "string" ? entry : null;
  } catch {
    return null;
  }
}

function writeCache(agentDir: string, entry: CacheEntry): void {
  const path = join(agentDir, CACHE_FILE);
  const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
  writeFileSync(tmp, JSON.stringify(entry) + "\n", { mode: 0o600, flag: "wx" });
  renameSync(tmp, path);
}

function fresh(entry: CacheEntry | null | undefined, key: string): entry is CacheEntry {
  if (!entry || entry.key !== key) return false;
  const s = entry.support;
  if (s.method === "none") return Date.now() - entry.probedAt < NONE_TTL_MS;
  return existsSync(s.method === "python3" ? s.relay : s.scriptChild);
}

/** Which terminal method works on this host; cached per agent directory (see file comment). */
export async function probeTerminalSupport(agentDir: string, opts: ProbeOptions = {}): Promise<TerminalSupport> {
  const searchPath = opts.searchPath ?? defaultSearchPath();
  const found: Found = {
    python: findProgram(["python3", "platform-python"], searchPath),
    script: findProgram(["script"], searchPath),
    stty: findProgram(["stty"], searchPath),
    node: opts.nodePath ?? process.execPath,
  };
  const key = JSON.stringify({ sources: sourcesHash(), ...found });
  const cacheId = `${agentDir}\0${key}`;
  const known = memo.get(cacheId);
  if (fresh(known, key)) return known.support;
  const cached = readCache(agentDir);
  if (fresh(cached, key)) {
    memo.set(cacheId, cached);
    return cached.support;
  }
  const support = await probe(agentDir, found);
  const entry = { key, support, probedAt: Date.now() };
  writeCache(agentDir, entry);
  memo.set(cacheId, entry);
  return support;
}

async function probe(agentDir: string, found: Found): Promise<TerminalSupport> {
  const files = installTerminalFiles(agentDir);
  const reasons: string[] = [];
  if (found.python) {
    const r = await probePython(found.python, files.relay);
    if (typeof r !== "string") return { method: "python3", python: r.executable, version: r.version, relay: files.relay };
    reasons.push(`${found.python}: ${r}`);
  } else {
    reasons.push("no python3");
  }
  if (found.script && found.stty) {
    const r = await probeScript(found.script, found.stty, found.node, files.scriptChild);
    if (r === null) return { method: "script", script: found.script, stty: found.stty, node: found.node, scriptChild: files.scriptChild };
    reasons.push(`${found.script}: ${r}`);
  } else {
    reasons.push(found.script ? "no stty" : "no script");
  }
  return { method: "none", reason: reasons.join("; ") };
}

function probePython(python: string, relay: string): Promise<{ executable: string; version: string } | string> {
  return new Promise((resolve) => {
    // The daemon's environment here (a version manager's shim may need it); the relay itself
    // then runs the real interpreter it reports, with an empty environment.
    execFile(python, ["-I", "-S", relay, "--probe"], { timeout: PROBE_TIMEOUT_MS, encoding: "utf8" }, (err, stdout, stderr) => {
      if (err) return resolve(oneLine(stderr) || err.message);
      try {
        const r = JSON.parse(stdout) as { ok?: boolean; version?: string; executable?: string };
        if (r.ok !== true || typeof r.version !== "string") return resolve("probe failed");
        const executable = typeof r.executable === "string" && r.executable.startsWith("/") ? r.executable : python;
        resolve({ executable, version: r.version });
      } catch {
        resolve(`unexpected probe output: ${oneLine(stdout)}`);
      }
    });
  });
}

/** Runs script → sh → our child in probe mode: descriptors must pass through and stty must size the pty. */
function probeScript(script: string, stty: string, node: string, child: string): Promise<string | null> {
  return new Promise((resolve) => {
    const proc = spawn(script, scriptArgs(node, child, ["--probe", stty]), {
      stdio: ["pipe", "pipe", "pipe", "pipe", "pipe"],
      env: {},
      cwd: "/",
      detached: true,
    });
    let status = "";
    let errText = "";
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      resolve("probe timed out");
    }, PROBE_TIMEOUT_MS);
    proc.on("error", (err) => {
      clearTimeout(timer);
      resolve(err.message);
    });
    proc.stdout!.resume();
    proc.stderr!.on("data", (d: Buffer) => (errText += d.toString("utf8")));
    const statusStream = proc.stdio[4] as NodeJS.ReadableStream;
    statusStream.on("data", (d: Buffer) => (status += d.toString("utf8")));
    statusStream.on("error", () => undefined);
    proc.on("close", () => {
      clearTimeout(timer);
      try {
        if ((JSON.parse(status.trim()) as { ok?: boolean }).ok === true) return resolve(null);
      } catch {
        // reported below
      }
      resolve(oneLine(errText) || "probe failed");
    });
  });
}

/** `script` runs its command with `sh -c`; the child's paths are ours (no workload data here). */
export function scriptArgs(node: string, child: string, extra: string[] = []): string[] {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  return ["-q", "-c", ["exec", node, child, ...extra].map((s, i) => (i === 0 ? s : quote(s))).join(" "), "/dev/null"];
}
