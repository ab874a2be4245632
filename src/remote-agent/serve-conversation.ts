// One agent conversation: the first JSON frame is the request, later frames belong to its op, and
// the op's answer (a `result` or `error` frame, or the streaming op's own last frame) ends it. The
// same code serves a one-shot agent on stdin/stdout and every mux stream of the host daemon; only
// the port (how bytes move and how the end looks) differs.
import { BinaryFrameDecoder, FrameKind, MAX_FRAME_PAYLOAD, encodeJson, type Frame } from "../shared/frames.js";
import { RuntimeError, toWireError } from "../shared/errors.js";
import { isRecord, parseJson } from "../shared/guards.js";
import type { AgentMessage } from "../shared/agent-api.js";
import type { AgentContext, ConversationEnd, ReceivedRequest } from "./context.js";
import { lookupOp } from "./op-registry.js";
import { markRoot } from "./root-marker.js";
import { checkAgentRoot } from "./root-guard.js";

export interface ConversationPort {
  /** False once the runtime's side wants draining (see `drained`). */
  write(buf: Buffer): boolean;
  drained(): Promise<void>;
  pauseInput(): void;
  resumeInput(): void;
  /** Called once after the last frame was written (`failed`: the input was malformed). */
  finish(failed: boolean): void;
  onData(listener: (chunk: Buffer) => void): void;
  onClose(listener: (how: ConversationEnd) => void): void;
}

export interface ConversationHost {
  agentDir: string;
  nodePath: string;
  /** The absolute root a request's configured root (maybe `~/…`) stands for; throws if not served here. */
  resolveRoot(root: string): string;
}

/**
 * Bytes all conversations of this process may hold for unfinished messages (a request sent as
 * JSON parts is buffered until its last part; the mux window does not bound that, since the bytes
 * were taken). Past it the conversation that asks for more fails as malformed input, so a peer
 * that opens streams of endless JSON parts costs this much memory at most, not 64 MiB a stream.
 */
export const MAX_HELD_BYTES = 128 * 1024 * 1024;
let held = 0;

/** Bytes held for unfinished messages by this process's conversations now (diagnostics, tests). */
export function heldBytes(): number {
  return held;
}

export function serveConversation(port: ConversationPort, host: ConversationHost): void {
  const decoder = new BinaryFrameDecoder();
  let mine = 0;
  const account = () => {
    held += decoder.held - mine;
    mine = decoder.held;
  };
  const release = () => {
    held -= mine;
    mine = 0;
  };
  const frameListeners: Array<(f: Frame) => void> = [];
  const closeListeners: Array<(how: ConversationEnd) => void> = [];
  let request: ReceivedRequest | undefined;
  let closedHow: ConversationEnd | null = null;
  let finished = false;

  const finish = (failed: boolean) => {
    if (finished) return;
    finished = true;
    port.finish(failed);
  };
  const send = (message: AgentMessage) => port.write(encodeJson(message));

  const onRequest = async (req: ReceivedRequest) => {
    const spec = lookupOp(req.op);
    try {
      if (!spec) throw new RuntimeError("input", `Unknown agent operation: ${req.op}`);
      if (req.root === "") throw new RuntimeError("input", "agent request has no root");
      const root = host.resolveRoot(req.root);
      checkAgentRoot();
      markRoot(root);
      const ctx: AgentContext = {
        request: req,
        root,
        agentDir: host.agentDir,
        nodePath: host.nodePath,
        sendJson: send,
        sendRaw: (buf) => port.write(buf),
        drained: () => port.drained(),
        onFrame: (l) => frameListeners.push(l),
        pauseInput: () => port.pauseInput(),
        resumeInput: () => port.resumeInput(),
        onClose: (l) => (closedHow !== null ? l(closedHow) : closeListeners.push(l)),
      };
      const value = await spec.handler(ctx);
      if (!spec.streaming) send({ type: "result", value: value ?? null });
    } catch (err) {
      send({ type: "error", ...toWireError(err) });
    }
    finish(false);
  };

  let broken = false;
  port.onData((chunk) => {
    if (broken || (finished && !request)) return;
    let frames: Frame[];
    try {
      frames = decoder.push(chunk);
      account();
      if (held > MAX_HELD_BYTES) throw new Error(`unfinished messages of this agent's conversations exceed ${MAX_HELD_BYTES} bytes`);
    } catch (err) {
      broken = true;
      release();
      send({ type: "error", ...toWireError(new RuntimeError("input", String(err))) });
      finish(true);
      return;
    }
    for (const f of frames) {
      if (!request) {
        if (f.kind !== FrameKind.Json) continue;
        const value = parseJson(f.payload);
        if (!isRecord(value) || typeof value.op !== "string" || (value.root !== undefined && typeof value.root !== "string")) {
          send({ type: "error", errorClass: "input", message: "malformed agent request" });
          finish(true);
          return;
        }
        request = { ...value, op: value.op, root: value.root ?? "" };
        // Only a request may be long (argv and env); what follows it is frames of one payload.
        decoder.maxJsonMessage = MAX_FRAME_PAYLOAD;
        void onRequest(request);
      } else {
        for (const l of frameListeners) l(f);
      }
    }
  });
  port.onClose((how) => {
    release();
    if (closedHow !== null) return;
    closedHow = how;
    for (const l of closeListeners.splice(0)) l(how);
    if (!request) finish(false);
  });
}
