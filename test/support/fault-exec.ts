// A resumable exec run end to end in-process over the fault double (fault-link.ts): the real
// wrapper (runExec: fd0-fd4, ExecLink, its reattach rules), the real DaemonLink and mux on the Paseo
// side, the real mux and ExecSession (detach, replay, expiry) on the daemon side; only the workload
// is scripted, and the SSH connection is the fault double. What needs the real host daemon, sshd,
// broker and processes is proven in test/daemon/resume.test.ts and long-outage.test.ts.
import { PassThrough, type Duplex } from "node:stream";
import { ControlFrameSchema, ProcessEventSchema, decodeFrames, encodeCanonical } from "../../src/contract/index.js";
import { BinaryFrameDecoder, FrameKind, encodeFrame, encodeJson, type Frame } from "../../src/shared/frames.js";
import { Mux, type MuxStream } from "../../src/shared/mux.js";
import { DaemonLink } from "../../src/transport/daemon-link.js";
import type { RemoteHost } from "../../src/transport/host.js";
import { runExec } from "../../src/exec/run-exec.js";
import { ExecSession, findSession, resumeOf, type ExecContext } from "../../src/remote-agent/exec/exec-session.js";
import { parseRunRequest } from "../../src/remote-agent/exec/request.js";
import type { AgentContext, ConversationEnd, ReceivedRequest } from "../../src/remote-agent/context.js";
import { FaultNetwork } from "./fault-link.js";
import { RuntimeError, toWireError, type WireError } from "../../src/shared/errors.js";
import { TEST_RUNTIME_INSTANCE_ID } from "./run-cli.js";

const BUILD = "fault-double-build";

/** The workload's side, as the test scripts it: the exec's context on the daemon (outlives streams). */
export type Workload = (ctx: ExecContext, w: WorkloadView) => void;

/** What the daemon side saw, for assertions. */
export interface WorkloadView {
  /** Workload stdin, as the workload took it. */
  stdin: Buffer[];
  stdinEnded: boolean;
  /** How the exec's conversation was lost for good on the daemon ("expired": the grace ran out). */
  lost: ConversationEnd | null;
  /** exec.attach requests answered with `attached`. */
  attaches: number;
}

/** Sends one line of stdout from the workload. */
export function say(ctx: ExecContext, text: string): void {
  ctx.sendRaw(encodeFrame(FrameKind.Stdout, Buffer.from(text)));
}

/** The daemon's handling of one mux stream: exec.run starts a session, exec.attach takes one over. */
function serveStream(stream: MuxStream, workload: Workload, view: WorkloadView, refusals: WireError[]): void {
  const decoder = new BinaryFrameDecoder();
  const frameListeners: Array<(f: Frame) => void> = [];
  const closeListeners: Array<(how: ConversationEnd) => void> = [];
  let closed: ConversationEnd | null = null;
  const onClose = (how: ConversationEnd) => {
    if (closed !== null) return;
    closed = how;
    for (const l of closeListeners.splice(0)) l(how);
  };
  stream.on("end", () => onClose("end"));
  stream.on("close", (info) => onClose(info.reason ?? "end"));
  let request: ReceivedRequest | null = null;
  stream.on("data", (chunk: Buffer) => {
    for (const f of decoder.push(chunk)) {
      if (request) {
        for (const l of frameListeners) l(f);
        continue;
      }
      request = JSON.parse(f.payload.toString()) as ReceivedRequest;
      const ctx: AgentContext = {
        request,
        root: "/fault/root",
        agentDir: "/fault/agent",
        nodePath: process.execPath,
        sendJson: (m) => stream.write(encodeJson(m)),
        sendRaw: (b) => stream.write(b),
        drained: () => stream.drained(),
        onFrame: (l) => frameListeners.push(l),
        pauseInput: () => stream.pause(),
        resumeInput: () => stream.resume(),
        onClose: (l) => (closed !== null ? l(closed) : closeListeners.push(l)),
      };
      void serve(ctx).finally(() => stream.end());
    }
  });

  const serve = async (ctx: AgentContext): Promise<void> => {
    const req = ctx.request;
    if (req.op === "exec.attach") {
      const refusal = refusals.shift();
      if (refusal) {
        ctx.sendJson({ type: "error", ...refusal });
        return;
      }
      const session = findSession(String(req.token));
      if (!session) {
        const unknown = new RuntimeError("remote", "the host daemon no longer knows this exec", { code: "unknown-exec" });
        ctx.sendJson({ type: "error", ...toWireError(unknown) });
        return;
      }
      view.attaches++;
      await session.attach(ctx, Number(req.received), Number(req.gen));
      return;
    }
    const session = new ExecSession(ctx, resumeOf(parseRunRequest(req).resume));
    session.register();
    const exec = session.context;
    exec.onClose((how) => (view.lost = how));
    exec.onFrame((f) => {
      if (f.kind === FrameKind.Stdin) {
        view.stdin.push(f.payload);
        exec.inputTaken();
      } else if (f.kind === FrameKind.Eof) view.stdinEnded = true;
    });
    exec.sendJson({ type: "started", pid: 4242 });
    workload(exec, view);
    await session.done;
  };
}

export interface FaultExecOptions {
  graceMs: number;
  keepaliveMs: number;
  workload: Workload;
  /** Errors the daemon side answers exec.attach with before it serves one (oldest first). */
  attachRefusals?: WireError[];
}

/** Runs one pipes exec through runExec over a fresh fault network; what each side saw. */
export function faultExec(opts: FaultExecOptions) {
  const view: WorkloadView = { stdin: [], stdinEnded: false, lost: null, attaches: 0 };
  const refusals = [...(opts.attachRefusals ?? [])];
  const daemonMuxes: Mux[] = [];
  const net = new FaultNetwork((end: Duplex) => {
    const mux = new Mux(end, { role: "server", build: BUILD, pid: 4242 });
    daemonMuxes.push(mux);
    mux.on("stream", (s) => serveStream(s, opts.workload, view, refusals));
  });
  const linkLosses: string[] = [];
  const link = new DaemonLink(net.starter(BUILD), opts.keepaliveMs, { onLost: (why) => linkLosses.push(why) });
  const host: RemoteHost = {
    root: "~/.paseo-ssh",
    // As through the broker: a conversation lost with the link can be re-attached later.
    reattachable: true,
    openAgent: (o = {}) => link.agent(o.session !== undefined),
    openPty: () => Promise.reject(new Error("no pty over the fault double")),
    call: () => Promise.reject(new Error("no one-shot calls over the fault double")),
    close: () => link.close(),
  };
  const control = new PassThrough();
  const events = new PassThrough();
  const fd4: Buffer[] = [];
  events.on("data", (d: Buffer) => fd4.push(d));
  const io = { stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough() };
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  io.stdout.on("data", (d: Buffer) => stdout.push(d));
  io.stderr.on("data", (d: Buffer) => stderr.push(d));
  control.write(
    encodeCanonical(ControlFrameSchema, {
      type: "spawn",
      protocolVersion: 1,
      runtimeInstanceId: TEST_RUNTIME_INSTANCE_ID,
      argv: ["/bin/true"],
      env: {},
      purpose: { kind: "agent" },
      options: { host: "fault.test", user: "nobody", reconnectGraceMs: opts.graceMs, keepaliveIntervalMs: opts.keepaliveMs },
      execId: "exec-fault",
      stdio: { kind: "pipes" },
    }),
  );
  const code = runExec("ws-fault", io, { openHost: () => Promise.resolve(host), fds: { control, events } });
  return {
    net,
    link,
    view,
    linkLosses,
    daemonMuxes,
    stdin: io.stdin,
    code,
    stdout: () => Buffer.concat(stdout).toString(),
    stderr: () => Buffer.concat(stderr).toString(),
    /** fd4 events so far, decoded. */
    events: () => decodeFrames(Buffer.concat(fd4), ProcessEventSchema),
  };
}
