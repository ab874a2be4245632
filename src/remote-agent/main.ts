// Entry point of the remote agent: the one program the runtime starts on a host, always with the
// same fixed command line. It writes the ready marker (so login-shell noise before it can be
// skipped), reads one JSON request frame, dispatches it to an op module and reports the result.
// Secrets (workload env) arrive only in frames, never on a command line or in a file.
import { homedir } from "node:os";
import { dirname, resolve } from "node:path";
import { AGENT_READY_MARKER, FrameDecoder, FrameKind, encodeJson, type Frame } from "../shared/frames.js";
import { RuntimeError, toWireError } from "../shared/errors.js";
import type { AgentContext, AgentRequest } from "./context.js";
import { OPS } from "./ops.js";
import { ptyAttachMain } from "./exec/pty-attach.js";

function expandRoot(root: string): string {
  if (root === "~") return homedir();
  if (root.startsWith("~/")) return resolve(homedir(), root.slice(2));
  return resolve(root);
}

function main(): void {
  if (process.argv[2] === "pty-attach") return ptyAttachMain(process.argv[3] ?? "");
  const out = process.stdout;
  out.write(AGENT_READY_MARKER);
  const decoder = new FrameDecoder();
  const frameListeners: Array<(f: Frame) => void> = [];
  const closeListeners: Array<() => void> = [];
  let request: AgentRequest | undefined;
  let closed = false;

  const sendRaw = (buf: Buffer) => {
    if (!out.destroyed) out.write(buf);
  };
  const finish = (code: number) => {
    // Let stdout drain before exiting so the last frame is never lost.
    out.write(Buffer.alloc(0), () => process.exit(code));
  };

  const onRequest = async (req: AgentRequest) => {
    const spec = OPS[req.op];
    try {
      if (!spec) throw new RuntimeError("input", `Unknown agent operation: ${String(req.op)}`);
      if (typeof req.root !== "string" || req.root === "") throw new RuntimeError("input", "agent request has no root");
      const ctx: AgentContext = {
        request: req,
        root: expandRoot(req.root),
        agentDir: dirname(__filename),
        nodePath: process.execPath,
        sendJson: (v) => sendRaw(encodeJson(v)),
        sendRaw,
        onFrame: (l) => frameListeners.push(l),
        onClose: (l) => (closed ? l() : closeListeners.push(l)),
      };
      const value = await spec.handler(ctx);
      if (!spec.streaming) sendRaw(encodeJson({ type: "result", value: value ?? null }));
      finish(0);
    } catch (err) {
      sendRaw(encodeJson({ type: "error", ...toWireError(err) }));
      finish(0);
    }
  };

  process.stdin.on("data", (chunk: Buffer) => {
    let frames: Frame[];
    try {
      frames = decoder.push(chunk);
    } catch (err) {
      sendRaw(encodeJson({ type: "error", ...toWireError(new RuntimeError("input", String(err))) }));
      finish(1);
      return;
    }
    for (const f of frames) {
      if (!request) {
        if (f.kind !== FrameKind.Json) continue;
        try {
          request = JSON.parse(f.payload.toString("utf8")) as AgentRequest;
        } catch {
          sendRaw(encodeJson({ type: "error", errorClass: "input", message: "malformed agent request" }));
          finish(1);
          return;
        }
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
