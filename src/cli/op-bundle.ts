// Runs an operation's CommonJS bundle (dist/ops/<op>-<hash>.cjs, scripts/build.mjs) with V8's code
// cache. Paseo starts a fresh process per operation, and compiling the operation's code (zod, the
// contract, the transport) is a large part of what each start adds to bare node; Node 20 offers no
// code cache for ES modules, so the build emits these bundles and this loader compiles them
// itself. The cache is written once per bundle and node version, at the exit of the first process
// that ran the operation to success (so it holds every function that run compiled), into the
// private broker directory once a runtime process has made it: cached data is code, so it is read
// only from a directory and a file that are ours alone. Bundle names carry a content hash, so a
// cache never meets other source; V8 refuses cached data from another V8 version or flag set, and
// the bundle then compiles as usual.
import { isAscii } from "node:buffer";
import { lstatSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Script } from "node:vm";
import { brokerDirCandidates } from "../broker/common/broker-paths.js";
import * as errors from "../shared/errors.js";
import type { CliOperation } from "./operation.js";

/**
 * The module id under which the bundles reach src/shared/errors.ts: one RuntimeError class for the
 * dispatcher and the operation, so `instanceof` keeps working across the two (scripts/build.mjs).
 */
export const SHARED_ERRORS_ID = "paseo-ssh-runtime:shared-errors";

function uid(): number {
  return process.getuid?.() ?? 0;
}

/** dist/: this module is bundled into dist/cli.js. */
function distDir(): string {
  return dirname(fileURLToPath(import.meta.url));
}

/**
 * The private broker directory if a runtime process has made it (brokerDir's choice, without
 * creating anything): a cache is only an optimisation and must leave no directory behind.
 */
function privateDir(): string | null {
  for (const dir of brokerDirCandidates({ xdgRuntimeDir: process.env.XDG_RUNTIME_DIR, tmp: tmpdir() })) {
    try {
      const st = lstatSync(dir);
      if (st.isDirectory() && st.uid === uid() && (st.mode & 0o077) === 0) return dir;
    } catch {
      // brokerDir would create this one: nothing is cached yet.
      return null;
    }
  }
  return null;
}

/** Cached data is code: only a regular file of ours that nobody else may write is used. */
function readPrivate(path: string): Buffer | undefined {
  try {
    const st = lstatSync(path);
    if (!st.isFile() || st.uid !== uid() || (st.mode & 0o022) !== 0) return undefined;
    return readFileSync(path);
  } catch {
    return undefined;
  }
}

/** Writes the cache atomically and drops this operation's caches for other builds or node versions. */
function store(name: string, op: string, data: () => Buffer): void {
  // Looked up again: the directory may have gone meanwhile (the demo removes its own).
  const dir = privateDir();
  if (!dir) return;
  const path = join(dir, name);
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, data(), { mode: 0o600 });
    renameSync(tmp, path);
    for (const old of readdirSync(dir)) {
      if (old !== name && old.startsWith(`v8-${op}-`) && old.endsWith(".bin")) rmSync(join(dir, old), { force: true });
    }
  } catch {
    // Best effort: the next process compiles as usual and tries again.
    rmSync(tmp, { force: true });
  }
}

/** Loads `file` (relative to dist/) as Node loads a CommonJS module, with the code cache. */
export function loadOperationBundle(file: string): { default: CliOperation } {
  const path = join(distDir(), file);
  // The build writes ASCII bundles, and ASCII read as latin1 skips UTF-8 decoding: a measurable
  // part of loading a few hundred kilobytes of source on every start.
  const bytes = readFileSync(path);
  const source = bytes.toString(isAscii(bytes) ? "latin1" : "utf8");
  const stem = basename(file, ".cjs");
  const op = stem.replace(/-[A-Z0-9]+$/, "");
  const cacheDir = privateDir();
  const cacheName = `v8-${stem}-${process.version}-${process.arch}.bin`;
  const cachedData = cacheDir ? readPrivate(join(cacheDir, cacheName)) : undefined;
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename: path,
    ...(cachedData ? { cachedData } : {}),
  });
  if (!cachedData || script.cachedDataRejected) {
    // Only a run that succeeded: one refused early compiled little, and an accepted cache is kept.
    process.once("exit", (code) => code === 0 && store(cacheName, op, () => script.createCachedData()));
  }
  // The dispatcher's own require (this module is bundled into dist/cli.js, CommonJS): a bundle
  // requires only packages and node: built-ins, which resolve from dist/ as from dist/ops/, and
  // createRequire would cost every start node:module (and with it node's ES module loader).
  const bundleRequire = (id: string): unknown => (id === SHARED_ERRORS_ID ? errors : require(id));
  const module = { exports: {} as { default: CliOperation } };
  const init = script.runInThisContext() as (...args: unknown[]) => void;
  init.call(module.exports, module.exports, bundleRequire, module, path, dirname(path));
  return module.exports;
}
