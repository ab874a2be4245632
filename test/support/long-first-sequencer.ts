// Vitest's order for a run with several workers: the files that hold a long drill (a test declared
// with `longSuite(…)` from needs.ts: a minute or more of outage, or a proof repeated at scale) first, then vitest's own order (failed
// and slow files first by its cache, otherwise larger files first). Without this, on a clean clone
// with no cache a small file holding a 150 s drill starts last and the whole run waits for it alone.
import { readFileSync } from "node:fs";
import { BaseSequencer, type TestSpecification } from "vitest/node";

const LONG_DRILL = /\blongSuite\(/;

export function holdsLongDrill(file: string): boolean {
  try {
    return LONG_DRILL.test(readFileSync(file, "utf8"));
  } catch {
    return false;
  }
}

export default class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const long = sorted.filter((f) => holdsLongDrill(f.moduleId));
    return [...long, ...sorted.filter((f) => !long.includes(f))];
  }
}
