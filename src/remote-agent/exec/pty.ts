// PTY-mode exec, control side. Where this host has a way to own a terminal (../terminal: python3
// or util-linux `script`, probed once and cached), this agent process owns it (pty-terminal.ts):
// the terminal lives in the exec's conversation, with no SSH channel of its own. Where it has
// none, the terminal is the SSH server's own pty, as follows (it does not outlive its channel).
//
// sshd's pty: a pty-req with the requested size, so the size is in place before the program
// starts. This control agent has already validated the request; it opens a one-shot Unix socket
// in `<root>/run/` (0700) and hands the runtime a random token. The runtime opens a PTY channel
// running `agent.cjs pty-attach <token>` (tokens only on that command line); pty-attach connects
// here, receives the launch (argv/env/cwd: secrets stay in streams) and reports the workload's
// pid, size checks and exit.
import { createServer, type Socket } from "node:net";
import { chmodSync, lstatSync, mkdirSync, readdirSync, unlinkSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { RuntimeError } from "../../shared/errors.js";
import { FrameKind, encodeData, type Frame } from "../../shared/frames.js";
import type { AgentContext, ConversationEnd } from "../context.js";
import type { ExecContext } from "./exec-session.js";
import { rootLayout } from "../layout.js";
import type { Launch } from "./launch.js";
import { decodeRuntimeMessage, type ExecRunRequest } from "../../shared/agent-api.js";
import type { ExecSupervisor } from "./supervisor.js";
import { execTagPath } from "../proc/process-set.js";
import { isAttachLine, onLines, sendLine } from "./attach-lines.js";
import { listenUnix } from "../../shared/listen-unix.js";
import { isMarkedRoot } from "../root-marker.js";
import { conversationLost } from "./sessions.js";
import {
  probeTerminalSupport,
  startIdleRelay,
  type IdleRelay,
  type TerminalSupport,
  type UsableTerminalSupport,
} from "../terminal/host-terminals.js";
import { runTerminal } from "./pty-terminal.js";

/** How long the runtime has to open the PTY channel after receiving the token. */
export const PTY_ATTACH_TIMEOUT_MS = 20_000;

/** `<token>.sock`: only these are rendezvous sockets (run/ also holds the host daemon's). */
const RENDEZVOUS = /^[0-9a-f]{32}\.sock$/;

/**
 * A rendezvous socket lives at most PTY_ATTACH_TIMEOUT_MS (it is unlinked on attach or timeout);
 * one older than twice that was left by an agent killed while waiting. Runs with cwd = run/.
 */
function sweepStaleSockets(): void {
  const cutoff = Date.now() - 2 * PTY_ATTACH_TIMEOUT_MS;
  for (const name of readdirSync(".")) {
    if (!RENDEZVOUS.test(name)) continue;
    try {
      if (lstatSync(name).mtimeMs < cutoff) unlinkSync(name);
    } catch {
      // gone already, or another agent's sweep won
    }
  }
}

/** Probes in flight, so execs arriving together (or the daemon's warm-up) share one probe. */
const probing = new Map<string, Promise<TerminalSupport>>();

/**
 * How this host can own a terminal (cached by the probe itself; this only joins concurrent
 * callers). `searchPath` replaces where the programs are looked for (test hooks only).
 */
export function terminalSupport(agentDir: string, searchPath?: string): Promise<TerminalSupport> {
  const key = `${agentDir}\0${searchPath === undefined ? "default" : `path:${searchPath}`}`;
  let p = probing.get(key);
  if (!p) {
    p = probeTerminalSupport(agentDir, searchPath === undefined ? {} : { searchPath }).finally(() => probing.delete(key));
    probing.set(key, p);
  }
  return p;
}

/**
 * One relay per agent directory started ahead of the next PTY exec (python3 only), once this
 * process has run a PTY exec: that exec then starts as fast as a pipes exec instead of waiting for
 * the interpreter.
 */
const idleRelays = new Map<string, IdleRelay>();

function takeIdleRelay(agentDir: string, support: UsableTerminalSupport): IdleRelay | undefined {
  const relay = idleRelays.get(agentDir);
  if (!relay || JSON.stringify(relay.support) !== JSON.stringify(support)) return undefined;
  idleRelays.delete(agentDir);
  return relay;
}

/** Started a moment after an exec's terminal came up, so it does not slow that exec's first steps. */
const IDLE_RELAY_DELAY_MS = 100;

function prepareIdleRelay(agentDir: string, support: UsableTerminalSupport): void {
  setTimeout(() => {
    if (idleRelays.get(agentDir)?.usable) return;
    const relay = startIdleRelay(support);
    if (relay) idleRelays.set(agentDir, relay);
    else idleRelays.delete(agentDir);
  }, IDLE_RELAY_DELAY_MS).unref();
}

export async function runPty(ctx: ExecContext, sup: ExecSupervisor, launch: Launch | null, req: ExecRunRequest): Promise<void> {
  if (!launch) return sup.notFound(req.argv[0]!);
  if (req.stdio.kind !== "pty") throw new RuntimeError("input", "exec request has an invalid stdio");
  const support = await terminalSupport(ctx.agentDir, sup.hooks.terminalSearchPath);
  if (support.method !== "none") {
    return runTerminal(ctx, sup, {
      support,
      launch,
      req: { ...req, stdio: req.stdio },
      idle: takeIdleRelay(ctx.agentDir, support),
      afterStart: () => prepareIdleRelay(ctx.agentDir, support),
    });
  }
  return runSshdPty(ctx, sup, launch, req);
}

async function runSshdPty(ctx: ExecContext, sup: ExecSupervisor, launch: Launch, req: ExecRunRequest): Promise<void> {
  const runBase = rootLayout(ctx.root).runBase;
  mkdirSync(runBase, { recursive: true, mode: 0o700 });
  chmodSync(runBase, 0o700);
  const token = randomBytes(16).toString("hex");
  // Bound relative to `run/` (our cwd from here on; every other path we use is absolute): a Unix
  // socket path is limited to ~104 bytes, which a long configured root would otherwise exceed.
  process.chdir(runBase);
  if (isMarkedRoot(ctx.root)) sweepStaleSockets();
  const sockPath = `${token}.sock`;
  const server = createServer();
  await listenUnix(server, sockPath);
  chmodSync(sockPath, 0o600);
  const cleanupSocket = () => {
    server.close();
    try {
      unlinkSync(sockPath);
    } catch {
      // already removed
    }
  };

  let attach: Socket | null = null;
  const fromRuntime: Frame[] = [];
  const onRuntimeFrame = (f: Frame) => {
    if (f.kind !== FrameKind.Json) return;
    const msg = decodeRuntimeMessage(f.payload);
    if (msg?.type === "signal") sup.deliver(msg.signal);
    else if (msg?.type === "resize" && attach) sendLine(attach, { type: "check-size", id: msg.id, rows: msg.rows, cols: msg.cols });
    else if (msg?.type === "resize") fromRuntime.push(f);
  };
  ctx.onFrame(onRuntimeFrame);
  let channelClosed = false;
  const closed = new Promise<ConversationEnd>((resolve) =>
    ctx.onClose((how) => {
      channelClosed = true;
      resolve(how);
    }),
  );

  // sshd's pty ends with its SSH channel, so this exec cannot survive a lost link: the wrapper
  // drops its token on `pty-token` too, and a loss is the exec's loss (reaped after 1 s).
  ctx.dropResume();
  ctx.sendJson({ type: "pty-token", token });
  const sock = await Promise.race([
    new Promise<Socket>((resolve) => server.once("connection", resolve)),
    new Promise<null>((resolve) => setTimeout(() => resolve(null), PTY_ATTACH_TIMEOUT_MS).unref()),
    closed.then(() => null),
  ]);
  cleanupSocket();
  if (!sock) {
    sup.refuse(new RuntimeError("network", channelClosed ? "runtime left before the PTY attached" : "the PTY channel did not attach"));
  }
  attach = sock;
  for (const f of fromRuntime.splice(0)) onRuntimeFrame(f);

  let lostHow: ConversationEnd = "end";
  const outcome = await new Promise<"exit" | "lost" | "closed">((resolve) => {
    onLines(sock, isAttachLine, (msg) => {
      if (msg.type === "spawned") {
        const ident = { pid: msg.pid, pgid: msg.pgid, sid: msg.sid, startTime: msg.startTime };
        void sup.publish(ident);
      } else if (msg.type === "spawn-failed") {
        void sup.publish(null).then(() => {
          for (const fr of encodeData(FrameKind.Stderr, Buffer.from(msg.message))) ctx.sendRaw(fr);
          sup.complete(msg.code, null);
          resolve("exit");
        });
      } else if (msg.type === "resized") {
        ctx.sendJson({ type: "resized", id: msg.id, ok: msg.ok });
      } else if (msg.type === "exit") {
        const { code, signal } = msg;
        const report = () => {
          sup.complete(code, signal);
          resolve("exit");
        };
        if (sup.published) report();
        else void sup.publish(null).then(report);
      }
    });
    sock.on("close", () => resolve("lost"));
    sock.on("error", () => resolve("lost"));
    void closed.then((how) => {
      lostHow = how;
      resolve("closed");
    });
    sendLine(sock, { type: "launch", ...launch, env: req.env, tagPath: execTagPath(sup.layout, sup.execId) });
  });
  if (outcome === "exit") {
    sock.end();
    return;
  }
  if (outcome === "closed") {
    // Keep pty-attach connected through the grace: closing its socket would make it reap at once.
    await conversationLost(sup, lostHow);
    sock.destroy();
    return;
  }
  // pty-attach vanished before reporting an exit (PTY channel lost): reap the tree and say so.
  await sup.abandon(0);
  throw new RuntimeError("remote", "the PTY session ended before the workload reported its exit");
}
