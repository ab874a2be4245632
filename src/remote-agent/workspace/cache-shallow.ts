// Shallow histories in a cache on the host. A cache holds whatever shallow sources sent it, so some
// of its commits lack their parents. It keeps no `shallow` file of its own (a shallow repository
// cannot be cloned with --shared, so every checkout would copy its objects); instead each create
// records its source's boundary in `<cache>/paseo-shallow/`, one file per distinct boundary (no
// lock: concurrent creates never lose each other's entries), and the cache's boundary is every
// recorded commit it holds whose parents it lacks. A checkout gets the part of it its commit
// reaches as its own `.git/shallow`, so `git log` shows the source's history and stops where it does.
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { git, gitResult, SHA_RE } from "../../shared/git-exec.js";

const dirOf = (cache: string) => join(cache, "paseo-shallow");

/** Adds a source's boundary to what the cache remembers (nothing for a complete history). */
export function recordShallow(cache: string, boundary: string[]): void {
  if (boundary.length === 0) return;
  const text = [...new Set(boundary)].sort().join("\n") + "\n";
  const dir = dirOf(cache);
  const path = join(dir, createHash("sha256").update(text).digest("hex").slice(0, 32));
  if (existsSync(path)) return;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = `${path}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    writeFileSync(tmp, text, { mode: 0o600 });
    renameSync(tmp, path);
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** The cache's boundary: recorded commits it has whose parents it does not all have. */
export async function cacheBoundary(cache: string): Promise<string[]> {
  const dir = dirOf(cache);
  if (!existsSync(dir)) return [];
  const recorded = new Set<string>();
  for (const name of readdirSync(dir).filter((n) => !n.endsWith(".tmp"))) {
    for (const line of readFileSync(join(dir, name), "utf8").split("\n")) if (SHA_RE.test(line)) recorded.add(line);
  }
  if (recorded.size === 0) return [];
  const held = await commitsIn(cache, [...recorded]);
  if (held.length === 0) return [];
  // "<commit> <parent>..." read from the commits themselves: their parents need not be there.
  const out = await git(["rev-list", "--no-walk=unsorted", "--parents", "--stdin"], { cwd: cache, input: held.join("\n") + "\n" });
  const parents = out
    .split("\n")
    .filter(Boolean)
    .map((l) => l.split(" "));
  const present = new Set(await commitsIn(cache, [...new Set(parents.flatMap(([, ...ps]) => ps))]));
  return parents.filter(([, ...ps]) => ps.some((p) => !present.has(p))).map(([sha]) => sha!);
}

/** Which of `shas` the cache holds as commits. */
export async function commitsIn(cache: string, shas: string[]): Promise<string[]> {
  if (shas.length === 0) return [];
  const out = await git(["cat-file", "--batch-check=%(objectname) %(objecttype)"], { cwd: cache, input: shas.join("\n") + "\n" });
  return out
    .split("\n")
    .filter((l) => l.endsWith(" commit"))
    .map((l) => l.split(" ")[0]!);
}

/** The part of the cache's boundary `commit` (which the cache holds) reaches, walking with the boundary as the cut. */
export async function reachedBoundary(cache: string, commit: string, tmpBase: string): Promise<string[]> {
  const boundary = await cacheBoundary(cache);
  if (boundary.length === 0) return [];
  mkdirSync(tmpBase, { recursive: true, mode: 0o700 });
  const file = join(tmpBase, `shallow-${randomBytes(6).toString("hex")}`);
  try {
    writeFileSync(file, boundary.join("\n") + "\n", { mode: 0o600 });
    const r = await gitResult(["--shallow-file", file, "rev-list", commit], { cwd: cache, okCodes: [128], timeoutMs: 600_000 });
    // A cut nobody recorded (a cache an older runtime filled) stops the walk: then all of it.
    if (r.code !== 0) return boundary;
    const reached = new Set(r.stdout.split("\n"));
    return boundary.filter((c) => reached.has(c));
  } finally {
    rmSync(file, { force: true });
  }
}

/** Gives a repository (its git dir) the boundary as its `shallow` file; nothing for a complete history. */
export function writeShallowFile(gitDir: string, boundary: string[]): void {
  if (boundary.length > 0) writeFileSync(join(gitDir, "shallow"), boundary.join("\n") + "\n", { mode: 0o644 });
}
