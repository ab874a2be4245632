// The terminal relay programs the agent writes onto hosts, as esbuild `define`s: used by the
// agent build and by the test config (tests run the terminal driver from source).
import { readFileSync } from "node:fs";
import { join } from "node:path";

export function terminalSources(root) {
  const dir = join(root, "src/remote-agent/terminal");
  return {
    __TERMINAL_RELAY_PY__: JSON.stringify(readFileSync(join(dir, "relay.py"), "utf8")),
    __TERMINAL_SCRIPT_CHILD__: JSON.stringify(readFileSync(join(dir, "script-child.cjs"), "utf8")),
  };
}
