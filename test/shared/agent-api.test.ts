// The runtime <-> agent protocol checks every JSON frame before use: well-formed messages decode
// to their typed shape; anything else (wrong field types, unknown types, not JSON) is refused.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { AGENT_OPS, decodeAgentMessage, decodeRuntimeMessage, isAnswer } from "../../src/shared/agent-api.js";
import { lookupOp } from "../../src/remote-agent/op-registry.js";
import type { OneShotHandlers } from "../../src/remote-agent/context.js";
import { execHooks, workspaceHooks, TEST_HOOKS_FILE } from "../../src/remote-agent/test-hooks.js";

const json = (v: unknown) => Buffer.from(JSON.stringify(v));

describe("agent messages", () => {
  it("decode when every field has its type", () => {
    expect(decodeAgentMessage(json({ type: "exit", code: 3, signal: null }))).toEqual({ type: "exit", code: 3, signal: null });
    expect(decodeAgentMessage(json({ type: "started", pid: null }))).toEqual({ type: "started", pid: null });
    expect(decodeAgentMessage(json({ type: "resized", id: 2, ok: true }))?.type).toBe("resized");
    expect(decodeAgentMessage(json({ type: "error", errorClass: "not-ready", message: "x" }))?.type).toBe("error");
    expect(decodeAgentMessage(json({ type: "need-objects", haves: ["a"] }))?.type).toBe("need-objects");
    expect(decodeAgentMessage(json({ type: "need-objects", haves: [], modules: ["k"], shallow: ["c"] }))?.type).toBe("need-objects");
  });

  it("are refused when a field has the wrong type, the type is unknown or the frame is not JSON", () => {
    expect(decodeAgentMessage(json({ type: "exit", code: "3", signal: null }))).toBeNull();
    expect(decodeAgentMessage(json({ type: "ack", seq: 1.5 }))).toBeNull();
    expect(decodeAgentMessage(json({ type: "need-objects", haves: [], modules: 3 }))).toBeNull();
    expect(decodeAgentMessage(json({ type: "need-objects", haves: [], shallow: "c" }))).toBeNull();
    expect(decodeAgentMessage(json({ type: "attached", received: "3" }))).toBeNull();
    expect(decodeAgentMessage(json({ type: "error", errorClass: "fatal", message: "x" }))).toBeNull();
    expect(decodeAgentMessage(json({ type: "progress", phase: "elsewhere" }))).toBeNull();
    expect(decodeAgentMessage(json({ type: "hello" }))).toBeNull();
    expect(decodeAgentMessage(json({ type: "toString" }))).toBeNull();
    expect(decodeAgentMessage(json([1]))).toBeNull();
    expect(decodeAgentMessage(Buffer.from("{nope"))).toBeNull();
  });
});

describe("runtime messages", () => {
  it("accept only the supported signals and whole positive sizes", () => {
    expect(decodeRuntimeMessage(json({ type: "signal", signal: "SIGTERM" }))).toEqual({ type: "signal", signal: "SIGTERM" });
    expect(decodeRuntimeMessage(json({ type: "signal", signal: "SIGUSR1" }))).toBeNull();
    expect(decodeRuntimeMessage(json({ type: "resize", id: 1, rows: 0, cols: 80 }))).toBeNull();
    expect(decodeRuntimeMessage(json({ type: "abort", message: "pack failed" }))?.type).toBe("abort");
  });
});

describe("answers", () => {
  it("are checked against what the op answers", () => {
    expect(isAnswer("ping", { pong: true })).toBe(true);
    expect(isAnswer("workspace.pause", null)).toBe(true);
    expect(isAnswer("workspace.pause", {})).toBe(false);
    expect(isAnswer("workspace.inspect", { status: "ready", view: { lifecycle: "ready", cwd: "/w", lifecycleEnvironment: {} } })).toBe(
      true,
    );
    expect(isAnswer("workspace.inspect", { status: "ready" })).toBe(false);
    expect(isAnswer("exec.processes", { processes: [{ pid: "1", state: "S", command: "x" }] })).toBe(false);
  });
});

describe("the one-shot op table", () => {
  it("every op it declares is dispatched by the daemon as a one-shot op", () => {
    for (const op of Object.keys(AGENT_OPS)) expect(lookupOp(op)?.streaming, op).toBe(false);
    expect(lookupOp("workspace.teleport")).toBeUndefined();
  });

  it("a handler registry without one of its ops does not compile", () => {
    const unused = async (): Promise<never> => Promise.reject(new Error("not called"));
    // @ts-expect-error: only ping has a handler (tsc, run by npm run lint, checks this line)
    const partial: OneShotHandlers = { ping: unused };
    expect(Object.keys(partial)).toEqual(["ping"]);
  });
});

describe("test hooks", () => {
  const s = suite();

  it("are off without the file and bounded with it", () => {
    const root = s.tmp("hooks-");
    expect(workspaceHooks(root, "w")).toEqual({ beforeClaimMs: 0, afterClaimMs: 0 });
    writeFileSync(
      join(root, TEST_HOOKS_FILE),
      JSON.stringify({ workspaces: { w: { afterClaimMs: 99_999_999 } }, execs: { e: { delayIdentityMs: 300 } } }),
    );
    expect(workspaceHooks(root, "w")).toEqual({ beforeClaimMs: 0, afterClaimMs: 60_000 });
    expect(workspaceHooks(root, "other")).toEqual({ beforeClaimMs: 0, afterClaimMs: 0 });
    expect(execHooks(root, "e")).toEqual({ delayIdentityMs: 300 });
    expect(execHooks(root, "__proto__")).toEqual({ delayIdentityMs: 0 });
  });
});
