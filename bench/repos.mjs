// The bench's source repositories. `looseFixture`: 5,000 incompressible files (~40 MB) in one
// commit, every object loose, as right after `git add` of a big tree (made fresh each run, since
// the bench commits to it). `realisticRepo`: a project with history, generated deterministically
// by streaming commits into `git fast-import` (one packfile, no working tree: the runtime ships
// commits, not files), cached under bench/results/cache keyed by the generator's version and
// parameters, because building it costs about as much as a create.
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCommand } from "./runtime-driver.mjs";

/** Bump when the generated content changes: a new key, a new cache entry. */
const GENERATOR_VERSION = 1;
export const REALISTIC = { commits: 3000, initialFiles: 12000, editsPerCommit: 4, addsPerCommit: 3, seed: 20261129 };

const IDENT = "bench <bench@example.invalid>";

/** The environment without the caller's GIT_* variables, so git can only ever act on its cwd. */
function gitEnv() {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("GIT_")) delete env[k];
  return env;
}

export async function git(args, { cwd } = {}) {
  const r = await runCommand("git", args, { cwd, env: gitEnv(), timeoutMs: 600_000 });
  if (r.code !== 0) throw new Error(`git ${args[0]} failed (${r.signal ?? r.code}): ${r.stderr.trim().split("\n").pop()}`);
  return r.stdout;
}

const commitEnv = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"];

/** 5,000 files of base64 text (random, so it does not compress away) in one commit, objects loose. */
export async function looseFixture(dir, files = 5000, bytesPerFile = 8000) {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < files; i++) {
    const sub = join(dir, "src", `d${String(i % 50).padStart(2, "0")}`);
    if (i < 50) mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `f${i}.txt`), randomBytes((bytesPerFile * 3) / 4).toString("base64"));
  }
  await git(["init", "-q", "-b", "main", "."], { cwd: dir });
  // No auto-gc: the fixture's point is that its objects are loose.
  await git(["config", "gc.auto", "0"], { cwd: dir });
  await git(["add", "-A"], { cwd: dir });
  await git([...commitEnv, "commit", "-q", "-m", "init"], { cwd: dir });
  return { path: dir, files, label: `${files.toLocaleString("en")} files, ~${Math.round((files * bytesPerFile) / 1e6)} MB, loose objects` };
}

/** A one-file commit on top of the fixture (for the incremental-create row). */
export async function commitOneFile(dir) {
  writeFileSync(join(dir, "src", "d00", "f0.txt"), `change ${Date.now()}\n`, { flag: "a" });
  await git([...commitEnv, "commit", "-q", "-am", "one-file"], { cwd: dir });
}

/** mulberry32: small, fast, deterministic. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  "const let function return if else for while import export from class extends new this await async " +
  "value index count result error options config request response buffer stream handle path state " +
  "node parent child items list map set key entry size length offset start end next prev data text " +
  "string number boolean null undefined true false throw catch try finally switch case default break"
).split(" ");
const EXT = [".ts", ".ts", ".ts", ".js", ".md", ".json", ".css", ".tsx"];

/**
 * Source-like text: indented lines of keywords and identifiers (compresses about like code).
 * Sizes spread from ~150 B to ~16 KB, ~3.5 KB on average, as in real projects.
 */
function sourceText(rand, lines) {
  const out = [];
  let depth = 0;
  for (let i = 0; i < lines; i++) {
    const n = 2 + Math.floor(rand() * 9);
    const words = [];
    for (let j = 0; j < n; j++) {
      const w = WORDS[Math.floor(rand() ** 2 * WORDS.length)];
      words.push(rand() < 0.1 ? `${w}${Math.floor(rand() * 100)}` : w);
    }
    out.push(`${"  ".repeat(depth)}${words.join(" ")}${rand() < 0.3 ? " {" : ";"}`);
    if (out[out.length - 1].endsWith("{")) depth = Math.min(depth + 1, 6);
    else if (depth > 0 && rand() < 0.3) {
      depth--;
      out.push(`${"  ".repeat(depth)}}`);
    }
  }
  return out.join("\n") + "\n";
}

function lineCount(rand) {
  // log-uniform between 4 and 400 lines: ~3.5 KB on average
  return Math.round(Math.exp(Math.log(4) + rand() * (Math.log(400) - Math.log(4))));
}

/** Writes the fast-import stream for REALISTIC into `sink` (a writable), honouring back-pressure. */
async function writeHistory(sink, p) {
  const rand = prng(p.seed);
  let buffered = [];
  let bufferedBytes = 0;
  const put = async (s) => {
    buffered.push(s);
    bufferedBytes += s.length;
    if (bufferedBytes < 1 << 20) return;
    const chunk = buffered.join("");
    buffered = [];
    bufferedBytes = 0;
    if (!sink.write(chunk)) await new Promise((r) => sink.once("drain", r));
  };
  const dirs = [];
  for (let a = 0; a < 12; a++) for (let b = 0; b < 40; b++) dirs.push(`packages/pkg${a}/src/mod${b}`);
  const paths = [];
  const contents = new Map();
  const newPath = () => {
    const dir = dirs[Math.floor(rand() * dirs.length)];
    return `${dir}/file${paths.length}${EXT[Math.floor(rand() * EXT.length)]}`;
  };
  let time = 1_600_000_000;
  for (let c = 0; c < p.commits; c++) {
    const changes = [];
    const adds = c === 0 ? p.initialFiles : p.addsPerCommit;
    for (let i = 0; i < adds; i++) {
      const path = newPath();
      paths.push(path);
      const text = sourceText(rand, lineCount(rand));
      contents.set(path, text);
      changes.push([path, text]);
    }
    if (c > 0) {
      for (let i = 0; i < p.editsPerCommit; i++) {
        const path = paths[Math.floor(rand() * paths.length)];
        const lines = contents.get(path).split("\n");
        const at = Math.floor(rand() * lines.length);
        lines.splice(
          at,
          Math.floor(rand() * 3),
          ...sourceText(rand, 1 + Math.floor(rand() * 5))
            .trimEnd()
            .split("\n"),
        );
        const text = lines.join("\n");
        contents.set(path, text);
        changes.push([path, text]);
      }
    }
    time += 600 + Math.floor(rand() * 7200);
    const message = `change ${c}: ${WORDS[c % WORDS.length]} ${WORDS[(c * 7) % WORDS.length]}`;
    await put(`commit refs/heads/main\ncommitter ${IDENT} ${time} +0000\ndata ${Buffer.byteLength(message)}\n${message}\n`);
    for (const [path, text] of changes) {
      const data = Buffer.from(text);
      await put(`M 100644 inline ${path}\ndata ${data.length}\n${text}\n`);
    }
    await put("\n");
  }
  const rest = buffered.join("");
  if (rest) sink.write(rest);
  sink.end();
  return { files: paths.length };
}

/**
 * The realistic repository (REALISTIC), from the cache or generated. Resolves with its path and
 * what it holds; `log` reports progress on a first generation.
 */
export async function realisticRepo(cacheDir, log = () => undefined) {
  const key = createHash("sha256")
    .update(JSON.stringify({ GENERATOR_VERSION, ...REALISTIC }))
    .digest("hex")
    .slice(0, 12);
  const dir = join(cacheDir, `realistic-v${GENERATOR_VERSION}-${key}`);
  const metaFile = join(dir, ".git", "bench-repo.json");
  if (existsSync(metaFile)) {
    const meta = JSON.parse(readFileSync(metaFile, "utf8"));
    const head = (await git(["rev-parse", "HEAD"], { cwd: dir }).catch(() => "")).trim();
    if (head === meta.head) return { path: dir, ...meta, cached: true };
    log(`cached repository at ${dir} is not what its metadata says; regenerating`);
  }
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(cacheDir, { recursive: true });
  // Leftovers of generations that were interrupted (their process is gone).
  for (const name of readdirSync(cacheDir)) {
    const m = /\.tmp-(\d+)$/.exec(name);
    if (m && !existsSync(`/proc/${m[1]}`)) rmSync(join(cacheDir, name), { recursive: true, force: true });
  }
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const t0 = performance.now();
  log(`generating the realistic repository (${REALISTIC.commits} commits; cached for later runs)`);
  await git(["init", "-q", "-b", "main", "."], { cwd: tmp });
  await git(["config", "gc.auto", "0"], { cwd: tmp });
  const fi = spawn("git", ["fast-import", "--quiet", "--done"], { cwd: tmp, env: gitEnv(), stdio: ["pipe", "ignore", "pipe"] });
  let fiErr = "";
  fi.stderr.on("data", (d) => (fiErr += d));
  const finished = new Promise((resolve, reject) => {
    fi.on("error", reject);
    fi.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`git fast-import failed (${code}): ${fiErr.trim()}`))));
  });
  fi.stdin.on("error", () => undefined);
  const { files } = await writeHistory(
    {
      write: (s) => fi.stdin.write(s),
      once: (ev, f) => fi.stdin.once(ev, f),
      end: () => fi.stdin.end("done\n"),
    },
    REALISTIC,
  );
  await finished;
  // One pack with deltas as a gc'ed clone would have; HEAD names main.
  await git(["repack", "-a", "-d", "-q"], { cwd: tmp });
  const head = (await git(["rev-parse", "HEAD"], { cwd: tmp })).trim();
  const commits = Number((await git(["rev-list", "--count", "HEAD"], { cwd: tmp })).trim());
  const headFiles = (await git(["ls-tree", "-r", "--name-only", "HEAD"], { cwd: tmp })).split("\n").filter(Boolean).length;
  const treeBytes = (await git(["ls-tree", "-r", "-l", "HEAD"], { cwd: tmp }))
    .split("\n")
    .filter(Boolean)
    .reduce((sum, l) => sum + Number(l.split(/\s+/)[3] || 0), 0);
  const packKb = Number(/size-pack: (\d+)/.exec(await git(["count-objects", "-v"], { cwd: tmp }))?.[1] ?? 0);
  const meta = {
    head,
    commits,
    files: headFiles,
    generatedFiles: files,
    treeMB: +(treeBytes / 1e6).toFixed(1),
    packMB: +(packKb / 1024).toFixed(1),
  };
  writeFileSync(join(tmp, ".git", "bench-repo.json"), JSON.stringify(meta, null, 2));
  renameSync(tmp, dir);
  log(`generated in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify(meta)}`);
  return { path: dir, ...meta, cached: false };
}

export function realisticLabel(r) {
  return `${r.commits.toLocaleString("en")} commits, ${r.files.toLocaleString("en")} files, ${r.treeMB} MB tree, ${r.packMB} MB pack`;
}
