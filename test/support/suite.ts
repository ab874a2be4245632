// One fixture for what a test file sets up and must take down again (issue 31): temp dirs and
// cleanups registered as they are made, run in reverse order after each test (or after the block),
// every one of them even when an earlier one fails, with all failures reported together. Before,
// about forty files each kept a cleanups array, an afterEach loop that stopped at the first failing
// cleanup (leaving the rest of the test's processes and dirs behind), and mkdtemp/rmSync pairs.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { isAbsolute, join } from "node:path";
import { afterAll, afterEach } from "vitest";

/** Its result is awaited when it is a promise. */
export type Cleanup = () => unknown;

/** What helpers that register cleanups take: a Suite, or a plain array someone else runs. */
export interface Cleanups {
  push(...fns: Cleanup[]): unknown;
}

export interface Suite extends Cleanups {
  /** Registers cleanups; they run in reverse order of registration. */
  push(...fns: Cleanup[]): number;
  /** A fresh directory (under the system temp dir unless `prefix` is absolute), removed at cleanup. */
  tmp(prefix: string): string;
  /** Runs the registered cleanups now (newest first), all of them; throws one error naming every failure. */
  run(): Promise<void>;
}

/** Runs `fns` newest first, every one; one error listing every failure, if any. */
export async function runCleanups(fns: Cleanup[]): Promise<void> {
  const failures: unknown[] = [];
  for (const fn of fns.reverse()) {
    try {
      await fn();
    } catch (err) {
      failures.push(err);
    }
  }
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) {
    const lines = failures.map((f, i) => `  ${i + 1}. ${f instanceof Error ? f.message : String(f)}`);
    throw new AggregateError(failures, `${failures.length} cleanups failed:\n${lines.join("\n")}`);
  }
}

/**
 * The fixture of the enclosing describe block (or file): its cleanups run after each test
 * (`"each"`, the default) or once after the block (`"all"`, for what beforeAll or the block's body
 * sets up), within `timeoutMs` when given (else vitest's hookTimeout). Call it at the top of a file
 * or a describe body, not inside a test.
 */
export function suite(scope: "each" | "all" = "each", timeoutMs?: number): Suite {
  const fns: Cleanup[] = [];
  const s: Suite = {
    push: (...more) => fns.push(...more),
    tmp(prefix) {
      const dir = mkdtempSync(isAbsolute(prefix) ? prefix : join(tmpdir(), prefix));
      fns.push(() => rmSync(dir, { recursive: true, force: true }));
      return dir;
    },
    run: () => runCleanups(fns.splice(0)),
  };
  (scope === "each" ? afterEach : afterAll)(() => s.run(), timeoutMs);
  return s;
}
