// The Paseo side's half of forwardGitCredentials: whether git in a workspace on the host may have a
// credential, and which. The host's word counts for nothing here: the repository is the one the
// create sealed for that workspace (src/mirror/seal.ts), and the hosts allowed are those of that
// repository's remotes as this machine reads them, never the workspace's own config (which anything
// on the host can edit). The user's own `git credential` answers, without a prompt of any kind and
// within a bound; `store`/`erase` reach the user's helpers only for the very credential they gave.
import { gitResult } from "../shared/git-exec.js";
import type { CredentialAttributes, GitCredentialAnswer, GitCredentialAsk } from "../shared/agent-api.js";
import { verifyWorkHome } from "../mirror/seal.js";
import { localRemotes } from "./local-remotes.js";

/** git credential's bound: a helper that waits for a person is stopped. */
const CREDENTIAL_TIMEOUT_MS = 30_000;

/** `protocol://host[:port]` as the credential protocol names it, normalised (null: not a URL with a host). */
function origin(protocol: string, host: string): string | null {
  // A host with a path, user, query or fragment in it would be another string to the helpers than to the URL parser.
  if (!/^[a-z][a-z0-9+.-]*$/.test(protocol) || /[/?#@\\\s]/.test(host)) return null;
  try {
    const u = new URL(`${protocol}://${host}`);
    return u.host === "" ? null : `${u.protocol}//${u.host}`;
  } catch {
    return null;
  }
}

/** The http(s) hosts of every remote of the repository (fetch and push URLs). */
export async function remoteOrigins(repo: string): Promise<Set<string>> {
  const out = new Set<string>();
  for (const r of await localRemotes(repo)) {
    for (const url of [...r.urls, ...r.pushUrls]) {
      const m = /^(https?):\/\/([^/?#]+)/i.exec(url);
      const o = m ? origin(m[1]!.toLowerCase(), m[2]!.slice(m[2]!.lastIndexOf("@") + 1)) : null;
      if (o) out.add(o);
    }
  }
  return out;
}

function attributeLines(a: Partial<CredentialAttributes>): string {
  return (
    (["protocol", "host", "path", "username", "password"] as const)
      .filter((k) => a[k] !== undefined)
      .map((k) => `${k}=${a[k]}\n`)
      .join("") + "\n"
  );
}

/** `git credential <sub>` in `repo`, never prompting (no terminal, no askpass program), bounded. */
async function credential(repo: string, sub: "fill" | "approve" | "reject", a: Partial<CredentialAttributes>) {
  return gitResult(["credential", sub], {
    cwd: repo,
    input: attributeLines(a),
    okCodes: [128],
    errorClass: "input",
    timeoutMs: CREDENTIAL_TIMEOUT_MS,
    // An empty GIT_ASKPASS also hides core.askPass and SSH_ASKPASS from git.
    env: { GIT_TERMINAL_PROMPT: "0", GIT_ASKPASS: "" },
  });
}

/** What `git credential fill` answers, or why it answers nothing. */
async function fill(repo: string, a: Partial<CredentialAttributes>): Promise<GitCredentialAnswer> {
  const r = await credential(repo, "fill", a);
  if (r.code !== 0) {
    const said = r.stderr.trim().split("\n").pop() ?? "";
    return { refused: `git credential fill on the Paseo side gave none${said ? ` (${said})` : ""}` };
  }
  const got: Record<string, string> = {};
  for (const line of r.stdout.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) got[line.slice(0, eq)] = line.slice(eq + 1);
  }
  if (got.username === undefined || got.password === undefined)
    return { refused: "git credential fill on the Paseo side gave no username and password" };
  return { username: got.username, password: got.password };
}

/** Answers one ask of the host (`enabled`: the host's runtime options have forwardGitCredentials). */
export async function answerCredentialAsk(ask: GitCredentialAsk, enabled: boolean): Promise<GitCredentialAnswer> {
  if (!enabled) return { refused: "forwardGitCredentials is off for this host" };
  const repo = verifyWorkHome(ask.workHome, { owner: ask.owner, workspaceId: ask.workspaceId, commit: ask.createdFrom });
  if (!repo) {
    return { refused: "the host's record of the workspace's repository was not sealed by this machine for it: nothing is answered" };
  }
  const { protocol, host, path, username, password } = ask.attributes;
  const wanted = origin(protocol.toLowerCase(), host);
  if (!wanted || !(await remoteOrigins(repo)).has(wanted)) {
    return { refused: `${protocol}://${host} is not the host of a remote of the workspace's repository on the Paseo side` };
  }
  const asked = { protocol, host, ...(path !== undefined ? { path } : {}), ...(username !== undefined ? { username } : {}) };
  if (ask.action === "get") return fill(repo, asked);
  // store/erase: only the credential the user's helpers give now, so a host can neither plant a
  // password of its own nor erase one it was never given.
  if (username === undefined || password === undefined) return { refused: "git sent no username and password to store or erase" };
  const current = await fill(repo, asked);
  if (current.username !== username || current.password !== password) {
    return { refused: "not the credential the Paseo side gives for this host: left alone" };
  }
  const r = await credential(repo, ask.action === "store" ? "approve" : "reject", { ...asked, password });
  return r.code === 0 ? {} : { refused: `git credential ${ask.action === "store" ? "approve" : "reject"} on the Paseo side failed` };
}

/**
 * For `doctor`: whether this side's `git credential` answers, asked as a workspace's git would ask
 * (for the first http(s) remote of the repository at `cwd`, when there is one); names the helpers
 * otherwise. Says the username at most, never the password.
 */
export async function localCredentialCheck(cwd: string): Promise<{ ok: boolean; detail: string }> {
  const top = await gitResult(["rev-parse", "--show-toplevel"], { cwd, okCodes: [128], errorClass: "input" }).catch(() => null);
  const repo = top?.code === 0 ? top.stdout.trim() : null;
  const first = repo ? [...(await remoteOrigins(repo).catch(() => new Set<string>()))][0] : undefined;
  if (repo && first) {
    const u = new URL(first);
    const got: GitCredentialAnswer = await fill(repo, { protocol: u.protocol.slice(0, -1), host: u.host }).catch((err: Error) => ({
      refused: err.message,
    }));
    if (got.username !== undefined)
      return { ok: true, detail: `git credential answers for ${first} (user ${got.username}), a remote of ${repo}` };
    return {
      ok: false,
      detail: `${got.refused ?? "no answer"} for ${first}, a remote of ${repo}: pushes from workspaces get no credential`,
    };
  }
  const helpers = await gitResult(["config", "--get-all", "credential.helper"], { cwd, okCodes: [1], errorClass: "input" }).catch(
    () => null,
  );
  const names = (helpers?.stdout ?? "").split("\n").filter((h) => h !== "");
  if (names.length === 0)
    return { ok: false, detail: "no git credential helper is configured here: pushes from workspaces get no credential" };
  return {
    ok: true,
    detail: `git credential helpers here: ${names.join(", ")} (run doctor in a repository to ask them for its remotes' hosts)`,
  };
}
