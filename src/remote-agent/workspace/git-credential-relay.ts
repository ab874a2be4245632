// HTTPS credentials for git in the workspaces created with forwardGitCredentials, asked of the
// Paseo side each time git needs one and kept nowhere on the host. The checkout's own config names
// our helper (`agent.cjs git-credential <workspace key>`, no secret in it) after an empty
// `credential.helper` that drops the host's own helpers, so none of them answers first or writes
// what git approves into a file. The helper hands git's request to the host daemon over its Unix
// socket (op `git.credential`); the daemon asks the Paseo side on the notices stream (an ask,
// agent-api.ts HOST_ASK_TOPICS), which alone decides whether the host may have it. Whatever the
// outcome, git gets an answer within a bound: a credential, or `quit=1` (git stops with its own
// error instead of prompting on a terminal an exec may have) and one line saying why.
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { connect } from "node:net";
import {
  CredentialAction,
  GitCredentialAnswer,
  GitCredentialRequest,
  StreamHeader,
  streamHeader,
  type CredentialAttributes,
  type GitCredentialAsk,
} from "../../shared/agent-api.js";
import { BinaryFrameDecoder, FrameKind, encodeJson } from "../../shared/frames.js";
import { isRecord, parseJson } from "../../shared/guards.js";
import { git } from "../../shared/git-exec.js";
import { Mux } from "../../shared/mux.js";
import type { AgentContext } from "../context.js";
import { daemonPaths } from "../daemon/daemon-paths.js";
import { workspaceLayoutOfKey, type WorkspaceLayout } from "../layout.js";
import { noticeBoard } from "../notice-board.js";
import { parseRequest } from "./workspace-op-helpers.js";
import { shellWord } from "./ssh-agent.js";
import { parseManifest } from "./store.js";

/** The daemon's wait for the Paseo side (which bounds its own `git credential` run to 30 s). */
const ASK_MS = 35_000;
/** The helper's whole run: git never waits longer than this for us. */
const HELPER_MS = 40_000;
const MAX_INPUT = 64 * 1024;
const ATTRIBUTES = ["protocol", "host", "path", "username", "password"] as const;

/** git's command for our helper in a checkout (git appends the action). */
export function credentialHelperCommand(nodePath: string, agentFile: string, key: string): string {
  return `!${shellWord(nodePath)} ${shellWord(agentFile)} git-credential ${key}`;
}

/** Opts a new checkout in: the host's helpers dropped, ours the only one. */
export async function enableCredentialForwarding(layout: WorkspaceLayout, nodePath: string, agentFile: string): Promise<void> {
  const cfg = (...args: string[]) => git(["config", "--add", ...args], { cwd: layout.checkout });
  await cfg("credential.helper", "");
  await cfg("credential.helper", credentialHelperCommand(nodePath, agentFile, layout.key));
}

const refused = (why: string): GitCredentialAnswer => ({ refused: why });

/** The manifest of the workspace whose directory has `key`, or null when there is none of ours. */
function manifestOfKey(root: string, key: string) {
  const layout = workspaceLayoutOfKey(root, key);
  try {
    const text = readFileSync(layout.manifest, "utf8");
    const id = (parseJson(text) as { workspaceId?: unknown } | undefined)?.workspaceId;
    return typeof id === "string" ? parseManifest(text, id, basename(layout.dir)) : null;
  } catch {
    return null;
  }
}

/** `git.credential` (host daemon): git's request relayed to the Paseo side; its answer, or why there is none. */
export async function gitCredential(ctx: AgentContext): Promise<GitCredentialAnswer> {
  const req = parseRequest(GitCredentialRequest, ctx.request);
  const manifest = manifestOfKey(ctx.root, req.workspaceKey);
  if (!manifest) return refused("this workspace is gone from the host");
  if (!manifest.workHome) {
    return refused("credentials are forwarded only to workspaces created from a directory source (a repository on the Paseo side)");
  }
  if (!noticeBoard.answers("git-credential")) {
    return refused("no Paseo side with forwardGitCredentials is connected to this host now (link down, or the option is off)");
  }
  const { password, ...withoutPassword } = req.attributes;
  const ask: GitCredentialAsk = {
    workspaceId: manifest.workspaceId,
    owner: manifest.owner,
    createdFrom: manifest.commit,
    workHome: manifest.workHome,
    action: req.action,
    // git sends a password only to store or erase it; a `get` carries none.
    attributes: req.action === "get" || password === undefined ? withoutPassword : { ...withoutPassword, password },
  };
  const answer = await noticeBoard.ask("git-credential", ask, ASK_MS);
  if (!GitCredentialAnswer(answer)) return refused("the Paseo side did not answer (the link was lost, or no answer within 35 s)");
  return answer;
}

/** git's request on stdin: `key=value` lines up to a blank line or the end. */
function parseAttributes(text: string): Partial<Record<(typeof ATTRIBUTES)[number], string>> {
  const out: Partial<Record<(typeof ATTRIBUTES)[number], string>> = {};
  for (const line of text.split("\n")) {
    if (line === "") break;
    const eq = line.indexOf("=");
    const name = line.slice(0, eq);
    if (eq > 0 && (ATTRIBUTES as readonly string[]).includes(name)) out[name as (typeof ATTRIBUTES)[number]] = line.slice(eq + 1);
  }
  return out;
}

function readStdin(): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (d: string) => {
      text += d;
      if (text.length > MAX_INPUT) resolve(text.slice(0, MAX_INPUT));
    });
    process.stdin.on("end", () => resolve(text));
    process.stdin.on("error", () => resolve(text));
  });
}

/** One `git.credential` conversation with this build's host daemon; its answer, or why there is none. */
function askDaemon(agentFile: string, request: GitCredentialRequest): Promise<GitCredentialAnswer> {
  const paths = daemonPaths(agentFile);
  return new Promise((resolve) => {
    // The socket is named relative to run/: a root's absolute path may be longer than a socket path may be.
    try {
      process.chdir(paths.runDir);
    } catch {
      return resolve(refused("the host daemon has never run under this root"));
    }
    const sock = connect(paths.socket);
    const finish = (answer: GitCredentialAnswer) => {
      sock.destroy();
      resolve(answer);
    };
    sock.once("error", () => finish(refused("the host daemon is not running: no Paseo side is connected to this host")));
    sock.once("connect", () => {
      const mux = new Mux(sock, { role: "client", build: paths.hash, header: StreamHeader });
      mux.once("close", () => finish(refused("the host daemon closed the conversation")));
      const stream = mux.open(streamHeader.agent);
      const decoder = new BinaryFrameDecoder();
      stream.on("data", (d) => {
        for (const f of decoder.push(d)) {
          if (f.kind !== FrameKind.Json) continue;
          const m = parseJson(f.payload);
          if (isRecord(m) && m.type === "result" && GitCredentialAnswer(m.value)) return finish(m.value);
          if (isRecord(m) && m.type === "error")
            return finish(refused(typeof m.message === "string" ? m.message : "the host daemon failed"));
        }
      });
      stream.once("close", () => finish(refused("the host daemon closed the conversation")));
      stream.write(encodeJson({ op: "git.credential", root: paths.root, ...request }));
    });
  });
}

/**
 * The `git-credential <key> <action>` mode: git's helper. Exits 0 whatever happens (git reads a
 * helper's failure as "no answer" and would go on to prompt): no credential means `quit=1`.
 */
export async function credentialHelperMain(agentFile: string, args: string[]): Promise<void> {
  const [key = "", action = ""] = args;
  let answered = false;
  // One answer, then exit (a late one after the bound is dropped); git gone meanwhile is no failure.
  const done = (out: string): void => {
    if (answered) return;
    answered = true;
    process.stdout.on("error", () => process.exit(0));
    process.stdout.write(out, () => process.exit(0));
  };
  // git's helpers ignore operations they do not know (the protocol may grow).
  if (!CredentialAction(action)) return done("");
  setTimeout(() => {
    if (action === "get") process.stderr.write("paseo-ssh-runtime: no credential from the Paseo side within 40 s\n");
    done(action === "get" ? "quit=1\n" : "");
  }, HELPER_MS).unref();
  const given = parseAttributes(await readStdin());
  const attributes = { ...given, protocol: given.protocol ?? "", host: given.host ?? "" } satisfies CredentialAttributes;
  let answer: GitCredentialAnswer;
  try {
    answer = await askDaemon(agentFile, parseRequest(GitCredentialRequest, { workspaceKey: key, action, attributes }));
  } catch (err) {
    answer = refused((err as Error).message);
  }
  if (action !== "get") return done("");
  if (answer.username !== undefined && answer.password !== undefined) {
    return done(`username=${answer.username}\npassword=${answer.password}\n`);
  }
  const where = `${attributes.protocol}://${attributes.host}`;
  process.stderr.write(`paseo-ssh-runtime: no credential for ${where} from the Paseo side: ${answer.refused ?? "none was given"}\n`);
  done("quit=1\n");
}
