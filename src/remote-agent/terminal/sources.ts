// The two programs a terminal needs on the host (relay.py for python3, script-child.cjs under
// util-linux `script`) travel as text inside the agent bundle (scripts/build.mjs defines them; the
// test config does the same) and are written next to the agent once, atomically, so a concurrent
// reader never sees half a file and their command lines name the agent directory.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createHash, randomBytes } from "node:crypto";
import { join } from "node:path";

declare const __TERMINAL_RELAY_PY__: string;
declare const __TERMINAL_SCRIPT_CHILD__: string;

export interface TerminalFiles {
  relay: string;
  scriptChild: string;
}

/** Changes whenever either program does: part of the probe cache key. */
export function sourcesHash(): string {
  return createHash("sha256").update(__TERMINAL_RELAY_PY__).update("\0").update(__TERMINAL_SCRIPT_CHILD__).digest("hex").slice(0, 16);
}

function ensureFile(path: string, content: string): void {
  try {
    if (readFileSync(path, "utf8") === content) return;
  } catch {
    // absent: written below
  }
  const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
  writeFileSync(tmp, content, { mode: 0o600, flag: "wx" });
  renameSync(tmp, path);
}

export function installTerminalFiles(agentDir: string): TerminalFiles {
  mkdirSync(agentDir, { recursive: true, mode: 0o700 });
  const files = { relay: join(agentDir, "terminal-relay.py"), scriptChild: join(agentDir, "terminal-script-child.cjs") };
  ensureFile(files.relay, __TERMINAL_RELAY_PY__);
  ensureFile(files.scriptChild, __TERMINAL_SCRIPT_CHILD__);
  return files;
}
