// The terminal relay programs the agent writes onto hosts, as esbuild `define`s: used by the
// agent build and by the test config (tests run the terminal driver from source); plus a bundler
// for code that runs the driver outside vitest (the terminal test harness, bench/terminal.mjs).
import { build } from "esbuild";
import { chmodSync, readFileSync } from "node:fs";
import { join } from "node:path";

export function terminalSources(root) {
  const dir = join(root, "src/remote-agent/terminal");
  return {
    __TERMINAL_RELAY_PY__: JSON.stringify(readFileSync(join(dir, "relay.py"), "utf8")),
    __TERMINAL_SCRIPT_CHILD__: JSON.stringify(readFileSync(join(dir, "script-child.cjs"), "utf8")),
  };
}

/** Bundles `contents` (ESM source resolved from `root`) into a world-readable .cjs at `outfile`. */
export async function bundleWithTerminal(root, contents, outfile) {
  await build({
    stdin: { contents, resolveDir: root, sourcefile: "entry.ts", loader: "ts" },
    outfile,
    bundle: true,
    platform: "node",
    target: "node18",
    format: "cjs",
    logLevel: "error",
    define: terminalSources(root),
  });
  chmodSync(outfile, 0o644);
}
