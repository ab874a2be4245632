/** esbuild `define`s carrying the terminal relay programs' text (see terminal-sources.mjs). */
export function terminalSources(root: string): Record<"__TERMINAL_RELAY_PY__" | "__TERMINAL_SCRIPT_CHILD__", string>;
/** Bundles `contents` (ESM source resolved from `root`) into a world-readable .cjs at `outfile`. */
export function bundleWithTerminal(root: string, contents: string, outfile: string): Promise<void>;
