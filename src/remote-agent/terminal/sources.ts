// The two programs a terminal needs on the host (relay.py for python3, script-child.cjs under
// util-linux `script`) travel as text inside the agent bundle (scripts/build.mjs defines them; the
// test config does the same) and are written next to the agent once, atomically, so a concurrent
// reader never sees half a file and their command lines name the agent directory. Each is checked
// to hold exactly that text again right before a relay runs it (verified-file.ts).
import { mkdirSync } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { verifiedFile } from "../verified-file.js";

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

export function installTerminalFiles(agentDir: string): TerminalFiles {
  mkdirSync(agentDir, { recursive: true, mode: 0o700 });
  const files = { relay: join(agentDir, "terminal-relay.py"), scriptChild: join(agentDir, "terminal-script-child.cjs") };
  verifiedFile(files.relay, __TERMINAL_RELAY_PY__, 0o600);
  verifiedFile(files.scriptChild, __TERMINAL_SCRIPT_CHILD__, 0o600);
  return files;
}

/** The relay program file `path` as the probe found it, checked (or rewritten) right before it runs. */
export function verifiedRelayFile(kind: "python3" | "script", path: string): string {
  return verifiedFile(path, kind === "python3" ? __TERMINAL_RELAY_PY__ : __TERMINAL_SCRIPT_CHILD__, 0o600);
}
