// The fixed command lines that start (or install) the remote agent. sshd always runs a command
// through the user's login shell, which may be bash, zsh, fish or csh, and whose rc files may
// print to stdout. So the command is `exec /bin/sh -c '<script>' <name> '<root>' '<node>' [args]`:
// the script is one line with no single quote, backslash, `!` or newline (safe inside single
// quotes in all of those shells), and configuration travels as positional parameters. The script
// reports problems as sentinel lines (`PASEO-SSH-BOOT-1:<status>[:detail]`); anything else the
// shell prints before the agent's ready marker is noise and is ignored.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { RuntimeError } from "../shared/errors.js";

export const BOOT_SENTINEL = "PASEO-SSH-BOOT-1";

export type BootStatus =
  | "need-install"
  | "no-node"
  | "bad-node"
  | "old-node"
  | "no-git"
  | "installed"
  | "short-upload"
  | "install-failed"
  | "unsafe-root"
  | "unsafe-parent";

export interface AgentBundle {
  path: string;
  /** First 16 hex chars of sha256(file): the install directory name on hosts. */
  hash: string;
  size: number;
}

declare const __AGENT_HASH__: string | undefined;

/** dist/remote-agent.cjs: beside dist/cli.js in a build; from src/ (tests) in ../../dist. */
export function bundledAgentPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return here.endsWith("dist") ? join(here, "remote-agent.cjs") : join(here, "..", "..", "dist", "remote-agent.cjs");
}

/** The agent build next to dist/cli.js. Its bytes are read only when an install is needed. */
export function agentBundle(path = bundledAgentPath()): AgentBundle {
  let data: Buffer;
  try {
    data = readFileSync(path);
  } catch (err) {
    throw new RuntimeError(
      "remote",
      `remote agent bundle missing at ${path} (reinstall paseo-ssh-runtime or run npm run build): ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  const injected = typeof __AGENT_HASH__ === "string" ? __AGENT_HASH__ : undefined;
  const hash = createHash("sha256").update(data).digest("hex").slice(0, 16);
  if (injected !== undefined && injected !== hash) {
    throw new RuntimeError(
      "remote",
      `remote agent bundle at ${path} does not match this build (hash ${hash}, expected ${injected}); reinstall paseo-ssh-runtime or rebuild`,
    );
  }
  return { path, hash, size: data.length };
}

/**
 * Single-quotes a word for any of sh, bash, zsh, fish and csh (`'` becomes `'"'"'`). Backslash
 * (fish), `!` (csh history) and line breaks cannot be quoted for all of them and are refused.
 */
export function shellWord(value: string): string {
  if (/[\n\r\0\\!]/.test(value)) throw new Error(`value cannot be passed to a login shell safely: ${JSON.stringify(value)}`);
  return `'${value.replace(/'/g, `'"'"'`)}'`;
}

function wrap(name: string, script: string, params: string[]): string {
  if (/['\\!\n]/.test(script)) throw new Error(`bootstrap script for ${name} contains a character unsafe in login shells`);
  return ["exec", "/bin/sh", "-c", `'${script}'`, name, ...params.map(shellWord)].join(" ");
}

const HEX16 = /^[0-9a-f]{16}$/;
// `R` is the root ($1) with a leading `~/` expanded against the host's $HOME.
const ROOT = `R="$1"; case "$R" in "~/"*) R="$HOME/\${R#??}";; esac;`;

/**
 * Refuses to run or install anything unless the root, `agent/` and the agent's directory (those
 * that exist) are directories of the login user that group and others cannot write: otherwise
 * another local user could have put an `agent.cjs` there (its path is public) for us to run. A
 * symlink on the way must itself be ours or root's, or it could be pointed elsewhere in between.
 * Every directory above the root must pass OpenSSH's StrictModes rule (misc.c's safe_path): owned
 * by root or the login user and not writable by group or others, except that a sticky directory of
 * root's (/tmp) passes, since nobody else can rename or remove what we own in it, walking up until the login user's home or `/` — for the path as given (a symlink on it only by
 * its owner) and for its canonical form. Otherwise whoever can write a parent could rename the root
 * away and put their own in its place. `bad` reports `<status>:<mode>:<owner>:<path>` (status
 * `unsafe-root`, or `unsafe-parent` for a directory above the root) and stops. Needs S, R and D.
 */
const CHECK_ROOT_FNS = [
  `bad() { P="$1"; T="\${3:-unsafe-root}"; set -- $(ls -ld "$2" 2>/dev/null); echo "$S:$T:$1:$3:$P"; exit 86; };`,
  `ck() { [ -e "$1" ] || return 0; if [ -L "$1" ]; then set -- "$1" $(ls -ldn "$1"); [ "$4" = "$I" ] || [ "$4" = 0 ] || bad "$1" "$1"; fi;`,
  `[ -d "$1" ] || bad "$1" "$1"; [ -O "$1" ] || bad "$1" "$1/"; [ -z "$W" ] || wr "$1"; };`,
  `wr() { set -- "$1" $(ls -ldn "$1/" 2>/dev/null); case "$2" in d????w*|d???????w*) bad "$1" "$1/";; esac; };`,
  // Prints each path that is a directory group or others may write, or owned by neither root nor
  // us. No `!` (history expansion in csh): "owned, and writable" or else "not owned".
  `un() { find "$@" -prune "(" -user 0 -o -user "$I" ")" "(" -type d "(" -perm -020 -o -perm -002 ")" -print ")" -o "(" -user 0 -o -user "$I" ")" -o -print 2>/dev/null; };`,
  // The same for directories above the root, where a sticky directory of root's (/tmp) passes:
  // nobody else can rename or remove what we own in it.
  `up() { find "$@" -prune "(" -type d -user 0 -perm -1000 ")" -o "(" -user 0 -o -user "$I" ")" "(" -type d "(" -perm -020 -o -perm -002 ")" -print ")" -o "(" -user 0 -o -user "$I" ")" -o -print 2>/dev/null; };`,
  `pa() { L="$1"; Q="$1"; C=$(cd "$1" 2>/dev/null && pwd -P) || C="$1"; set --;`,
  `while :; do case "$L" in */*) ;; *) break;; esac; L="\${L%/*}"; set -- "$@" "\${L:-/}"; [ -n "$L" ] || break; [ "$L" = "$HOME" ] && break; done;`,
  // The parents, lexical then canonical (only when it differs: a symlink on the way), as arguments.
  `[ "$C" = "$Q" ] || { G=$(cd "$HOME" 2>/dev/null && pwd -P) || G="$HOME";`,
  `while :; do case "$C" in */*) ;; *) break;; esac; C="\${C%/*}"; set -- "$@" "\${C:-/}"; [ -n "$C" ] || break; [ "$C" = "$G" ] && break; done; };`,
  `W=$(un "$R/" "$R/agent/" "$D/"; [ $# -eq 0 ] || up "$@"); ck "$R"; ck "$R/agent"; ck "$D";`,
  `[ -z "$W" ] && return 0; for p in "$@"; do [ -z "$(up "$p")" ] || bad "$p" "$p" unsafe-parent; done; };`,
].join(" ");
// Ownership with test builtins, group/other write bits (and, above the root, owners) with one find
// over the root, agent/, the agent's directory and the parents, and `ls` only when it found one, to
// name it; path by path from the root down, so the first offender is reported.
const CHECK_ROOT = `pa "$R";`;

/**
 * Finds node, checks node >= 18 and git, checks the root is safely ours (CHECK_ROOT), then execs
 * `node <root>/agent/<hash>/agent.cjs [args]`.
 * The version check runs node once per (agent, node path); its result is remembered in
 * `<agentdir>/.node-ok` so the common path costs no extra process.
 */
export function bootstrapCommand(root: string, remoteNode: string | undefined, hash: string, args: string[] = []): string {
  if (!HEX16.test(hash)) throw new Error(`bad agent hash ${hash}`);
  const s = `S=${BOOT_SENTINEL};`;
  const script = [
    s,
    ROOT,
    `N="$2"; shift 2; D="$R/agent/${hash}"; A="$D/agent.cjs";`,
    `if [ -n "$N" ]; then test -x "$N" || { echo "$S:bad-node:$N"; exit 86; }; else N=$(command -v node 2>/dev/null) || N=""; fi;`,
    `for c in /usr/local/bin/node /usr/bin/node /opt/homebrew/bin/node; do if [ -z "$N" ] && [ -x "$c" ]; then N="$c"; fi; done;`,
    `if [ -z "$N" ]; then N=$(for c in "$HOME"/.nvm/versions/node/v*/bin/node; do if [ -x "$c" ]; then v="\${c%/bin/node}"; echo "\${v##*/v} $c"; fi; done | sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1); N="\${N#* }"; fi;`,
    `if [ -z "$N" ]; then echo "$S:no-node"; exit 86; fi;`,
    `command -v git >/dev/null 2>&1 || { echo "$S:no-git:$N"; exit 86; };`,
    `I=$(id -u);`,
    CHECK_ROOT_FNS,
    CHECK_ROOT,
    `K=""; if [ -f "$D/.node-ok" ]; then read -r K < "$D/.node-ok"; fi;`,
    `if [ "$K" = "$N" ] && [ -f "$A" ]; then exec "$N" "$A" "$@"; fi;`,
    `V=$("$N" -p process.versions.node 2>/dev/null); M="\${V%%.*}";`,
    `if [ "$M" -ge 18 ] 2>/dev/null; then :; else echo "$S:old-node:$V:$N"; exit 86; fi;`,
    `if [ -f "$A" ]; then echo "$N" > "$D/.node-ok" 2>/dev/null; exec "$N" "$A" "$@"; fi;`,
    `echo "$S:need-install:$N"; exit 87`,
  ].join(" ");
  return wrap("paseo-ssh-agent", script, [root, remoteNode ?? "", ...args]);
}

/**
 * Creates the agent's directory (0700, parents too), checks it is safely ours (CHECK_ROOT), then
 * receives the agent on stdin into a private temp file and links it into place only if no agent
 * is there yet: a running agent is never overwritten, and concurrent installers all succeed.
 * A short upload (lost channel) is detected by size and never linked.
 */
export function installCommand(root: string, hash: string, size: number): string {
  if (!HEX16.test(hash) || !Number.isSafeInteger(size)) throw new Error("bad install parameters");
  const script = [
    `S=${BOOT_SENTINEL}; umask 077;`,
    ROOT,
    `D="$R/agent/${hash}"; I=$(id -u);`,
    CHECK_ROOT_FNS,
    // Before creating anything (a foreign root may not even let us) and again after.
    CHECK_ROOT,
    `mkdir -p "$D" || exit 1;`,
    CHECK_ROOT,
    `T="$D/.agent.cjs.$$.tmp";`,
    `cat > "$T" || { rm -f "$T"; exit 1; };`,
    `Z=$(( $(wc -c < "$T") ));`,
    `if [ "$Z" -ne ${size} ]; then rm -f "$T"; echo "$S:short-upload:$Z"; exit 1; fi;`,
    `ln "$T" "$D/agent.cjs" 2>/dev/null; rm -f "$T";`,
    `if [ -f "$D/agent.cjs" ]; then echo "$S:installed"; else echo "$S:install-failed"; exit 1; fi`,
  ].join(" ");
  return wrap("paseo-ssh-install", script, [root]);
}

export interface BootReport {
  status: BootStatus;
  detail: string;
}

/** Watches pre-marker output for sentinel lines; everything else is login-shell noise. */
export class BootStatusScanner {
  private text = "";
  report: BootReport | undefined;

  push(chunk: Buffer): void {
    if (this.report || this.text.length > 256 * 1024) return;
    this.text += chunk.toString("latin1");
    const re = new RegExp(`${BOOT_SENTINEL}:([a-z-]+)(?::([^\\r\\n]*))?[\\r\\n]`);
    const m = re.exec(this.text);
    if (m) this.report = { status: m[1] as BootStatus, detail: m[2] ?? "" };
  }
}
