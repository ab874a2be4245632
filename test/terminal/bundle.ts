// Bundles the terminal harness (driver + scenarios) into one .cjs that any user can run with
// node, embedding the relay texts the way the agent build does.
import { chmodSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { bundleWithTerminal } from "../../scripts/terminal-sources.mjs";
import { scratch } from "./scenarios.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Path of a world-readable harness.cjs in a fresh scratch directory. */
export async function bundleHarness(): Promise<string> {
  const dir = scratch("harness");
  chmodSync(dir, 0o755);
  const outfile = join(dir, "harness.cjs");
  await bundleWithTerminal(ROOT, `import "./test/terminal/harness.ts";`, outfile);
  return outfile;
}
