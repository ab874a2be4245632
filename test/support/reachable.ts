// How many of some objects a full garbage collection leaves alive: for tests that a long stream
// keeps nothing it is done with reachable (pure logic; no timing, no RSS).
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** Counts the objects behind `refs` that survive a full collection. */
export async function survivors(refs: WeakRef<object>[]): Promise<number> {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  // A WeakRef made in the current job keeps its target until the job ends.
  await new Promise((r) => setTimeout(r, 0));
  gc();
  return refs.filter((r) => r.deref() !== undefined).length;
}
