// Test-only delays that widen race windows so the suites can act inside them: before and after a
// create claims its directory, and before an exec's identity is published. A create's delays end
// early once the test withdraws them (it acts inside the window, then releases it), so no test
// depends on a window being long enough on a busy machine. They are read from
// `<root>/test-hooks.json`, which only a test (or the host account itself) can write: nothing
// Paseo sends and no runtime option can turn them on. Without the file every delay is 0.
//   {"workspaces": {"<workspaceId>": {"beforeClaimMs": n, "afterClaimMs": n}},
//    "execs": {"<execId>": {"delayIdentityMs": n, "terminalSearchPath": "<dir>:<dir>"}}}
// `terminalSearchPath` replaces where a PTY exec looks for the programs that let this host own a
// terminal (python3, script, stty): a directory without them forces the sshd pty fallback.
//   {"host": {"git": {"searchPath": "<dir>:<dir>", "checkoutTimeoutMs": n}}}: `searchPath` replaces
// the PATH a create's checkout and `facts` find git and git-lfs on (a directory holding only git
// hides git-lfs from this host; one with a stand-in git-lfs makes its filter misbehave);
// `checkoutTimeoutMs` shortens the time a workspace's `git checkout` may take.
//   {"host": {"git": {"lfsCheckoutHoldMs": n}}}: a create holds between checking its LFS store's
// objects and `git lfs checkout` (while `<root>/test-hooks.lfs-held` exists), so a suite can
// rewrite an object there.
//   {"host": {"daemon": {"dropClientGone": n}}}: the host daemon refuses the first n client-gone
// notices it receives without applying them, as a daemon that lost them would.
//   {"host": {"daemon": {"notices": {"<key>": {…payload}}, "noticeKind"?: "<kind>"}}}: the host
// daemon publishes these as notices of kind "test", or of noticeKind unchecked (read every second;
// a key no longer listed is published gone), so a suite can watch the notices stream carry
// something from the daemon to the broker, or a kind or payload the broker must refuse.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isRecord, parseJson } from "../shared/guards.js";
import { sleep } from "../shared/async.js";

export const TEST_HOOKS_FILE = "test-hooks.json";

function hooksFor(root: string, section: "workspaces" | "execs" | "host", id: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(join(root, TEST_HOOKS_FILE), "utf8");
  } catch {
    return {};
  }
  const all = parseJson(text);
  const entries = isRecord(all) ? all[section] : undefined;
  const hooks = isRecord(entries) && Object.hasOwn(entries, id) ? entries[id] : undefined;
  return isRecord(hooks) ? hooks : {};
}

function ms(v: unknown, max: number): number {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.min(v, max) : 0;
}

export function workspaceHooks(root: string, workspaceId: string): { beforeClaimMs: number; afterClaimMs: number } {
  const h = hooksFor(root, "workspaces", workspaceId);
  return { beforeClaimMs: ms(h.beforeClaimMs, 60_000), afterClaimMs: ms(h.afterClaimMs, 60_000) };
}

/** How often a held create looks whether its hook was withdrawn. */
const HOOK_POLL_MS = 50;

/** Waits the `key` delay of `workspaceId` (at most `ms`), ending early once it is withdrawn. */
export async function holdWorkspaceHook(
  root: string,
  workspaceId: string,
  key: "beforeClaimMs" | "afterClaimMs",
  ms: number,
): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until && workspaceHooks(root, workspaceId)[key] > 0) await sleep(Math.min(HOOK_POLL_MS, until - Date.now()));
}

/** One exec's hooks, handed around as one object: all off unless a test wrote them. */
export interface ExecHooks {
  delayIdentityMs: number;
  terminalSearchPath?: string;
}

export function execHooks(root: string, execId: string): ExecHooks {
  const h = hooksFor(root, "execs", execId);
  return {
    delayIdentityMs: ms(h.delayIdentityMs, 30_000),
    ...(typeof h.terminalSearchPath === "string" ? { terminalSearchPath: h.terminalSearchPath } : {}),
  };
}

/** The PATH git and git-lfs are looked up on for checkouts and facts (undefined: the agent's own). */
export function hostGitSearchPath(root: string): string | undefined {
  const h = hooksFor(root, "host", "git");
  return typeof h.searchPath === "string" ? h.searchPath : undefined;
}

/** The time a workspace's `git checkout` may take (undefined: git-exec's default). */
export function hostCheckoutTimeoutMs(root: string): number | undefined {
  return ms(hooksFor(root, "host", "git").checkoutTimeoutMs, 600_000) || undefined;
}

export const LFS_HELD_FILE = "test-hooks.lfs-held";

/** Holds a create before `git lfs checkout` while `lfsCheckoutHoldMs` is set (at most that long). */
export async function holdLfsCheckout(root: string): Promise<void> {
  const hold = () => ms(hooksFor(root, "host", "git").lfsCheckoutHoldMs, 60_000);
  const until = Date.now() + hold();
  if (Date.now() >= until) return;
  const marker = join(root, LFS_HELD_FILE);
  writeFileSync(marker, "");
  try {
    while (Date.now() < until && hold() > 0) await sleep(Math.min(HOOK_POLL_MS, until - Date.now()));
  } finally {
    rmSync(marker, { force: true });
  }
}

/** How many client-gone notices the host daemon refuses unapplied (0: none). */
export function droppedClientGoneNotices(root: string): number {
  const n = hooksFor(root, "host", "daemon").dropClientGone;
  return typeof n === "number" && Number.isInteger(n) && n > 0 ? Math.min(n, 100) : 0;
}

/**
 * Notices the daemon should hold (key → payload), of kind "test" or of the hook's `noticeKind`
 * (any string: a suite plays a host that sends a kind the broker does not know, or a malformed
 * payload of a real kind, unchecked); null without the hook.
 */
export function testNotices(root: string): { kind: string; notices: Record<string, Record<string, unknown>> } | null {
  const hooks = hooksFor(root, "host", "daemon");
  const n = hooks.notices;
  if (!isRecord(n)) return null;
  const notices: Record<string, Record<string, unknown>> = {};
  for (const [key, payload] of Object.entries(n)) if (isRecord(payload)) notices[key] = payload;
  const kind = typeof hooks.noticeKind === "string" && hooks.noticeKind !== "" ? hooks.noticeKind : "test";
  return { kind, notices };
}
