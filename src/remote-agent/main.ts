// Entry point of the remote agent: the one program the runtime starts on a host, always with the
// same fixed command line. It writes the ready marker (so login-shell noise before it can be
// skipped), reads one JSON request frame, dispatches it to an op module and reports the result.
// Secrets (workload env) arrive only in frames, never on a command line or in a file.
import { homedir } from "node:os";
import { dirname, resolve } from "node:path";
import { AGENT_READY_MARKER, BinaryFrameDecoder, FrameKind, encodeJson, type Frame } from "../shared/frames.js";
import { RuntimeError, toWireError } from "../shared/errors.js";
import { isRecord, parseJson } from "../shared/guards.js";
import type { AgentMessage } from "../shared/agent-api.js";
import type { AgentContext, ReceivedRequest } from "./context.js";
import { lookupOp } from "./ops.js";
import { ptyAttachMain } from "./exec/pty-attach.js";
import { markRoot } from "./root-marker.js";

function expandRoot(root: string): string {
  if (root === "~") return homedir();
  if (root.startsWith("~/")) return resolve(homedir(), root.slice(2));
  return resolve(root);
}

function main(): void {
  if (process.argv[2] === "pty-attach") return ptyAttachMain(process.argv[3] ?? "");
  const out = process.stdout;
  out.write(AGENT_READY_MARKER);
  const decoder = new BinaryFrameDecoder();
  const frameListeners: Array<(f: Frame) => void> = [];
  const closeListeners: Array<() => void> = [];
  let request: ReceivedRequest | undefined;
  let closed = false;

  const sendRaw = (buf: Buffer): boolean => (out.destroyed ? true : out.write(buf));
  const send = (message: AgentMessage) => sendRaw(encodeJson(message));
  const drained = () => new Promise<void>((resolve) => (out.writableNeedDrain ? out.once("drain", resolve) : resolve()));
  const finish = (code: number) => {
    // Let stdout drain before exiting so the last frame is never lost.
    out.write(Buffer.alloc(0), () => process.exit(code));
  };

  const onRequest = async (req: ReceivedRequest) => {
    const spec = lookupOp(req.op);
    try {
      if (!spec) throw new RuntimeError("input", `Unknown agent operation: ${req.op}`);
      if (req.root === "") throw new RuntimeError("input", "agent request has no root");
      const root = expandRoot(req.root);
      markRoot(root);
      const ctx: AgentContext = {
        request: req,
        root,
        agentDir: dirname(__filename),
        nodePath: process.execPath,
        sendJson: send,
        sendRaw,
        drained,
        onFrame: (l) => frameListeners.push(l),
        pauseInput: () => process.stdin.pause(),
        resumeInput: () => process.stdin.resume(),
        onClose: (l) => (closed ? l() : closeListeners.push(l)),
      };
      const value = await spec.handler(ctx);
      if (!spec.streaming) send({ type: "result", value: value ?? null });
      finish(0);
    } catch (err) {
      send({ type: "error", ...toWireError(err) });
      finish(0);
    }
  };

  process.stdin.on("data", (chunk: Buffer) => {
    let frames: Frame[];
    try {
      frames = decoder.push(chunk);
    } catch (err) {
      send({ type: "error", ...toWireError(new RuntimeError("input", String(err))) });
      finish(1);
      return;
    }
    for (const f of frames) {
      if (!request) {
        if (f.kind !== FrameKind.Json) continue;
        const value = parseJson(f.payload);
        if (!isRecord(value) || typeof value.op !== "string" || (value.root !== undefined && typeof value.root !== "string")) {
          send({ type: "error", errorClass: "input", message: "malformed agent request" });
          finish(1);
          return;
        }
        request = { ...value, op: value.op, root: value.root ?? "" };
        void onRequest(request);
      } else {
        for (const l of frameListeners) l(f);
      }
    }
  });
  process.stdin.on("end", () => {
    closed = true;
    for (const l of closeListeners.splice(0)) l();
    if (!request) finish(0);
  });
  // A lost channel shows as EPIPE on stdout; treat it like a close instead of crashing.
  out.on("error", () => {
    closed = true;
    for (const l of closeListeners.splice(0)) l();
  });
}

declare const __filename: string;
main();
