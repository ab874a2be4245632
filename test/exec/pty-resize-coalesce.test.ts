// The wrapper's resize rule for PTY execs, as pure logic against a scripted agent (no host): one
// resize in flight at a time; those that queue up meanwhile (as during an outage) are coalesced —
// only the latest size is sent — and once it is applied every id it covers is acknowledged on fd4,
// once each and in order. The real-host cases (a reset with resizes during it) are in
// test/daemon/resume.test.ts.
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { ControlFrameSchema, ProcessEventSchema, decodeFrames, encodeCanonical } from "../../src/contract/index.js";
import { AGENT_READY_MARKER, BinaryFrameDecoder, FrameKind, encodeJson } from "../../src/shared/frames.js";
import { decodeRuntimeMessage, type AgentMessage } from "../../src/shared/agent-api.js";
import { AgentChannel } from "../../src/transport/agent-channel.js";
import type { RemoteHost } from "../../src/transport/host.js";
import { runExec } from "../../src/exec/run-exec.js";
import { TEST_RUNTIME_INSTANCE_ID } from "../support/run-cli.js";
import { waitFor } from "../rig/rig.js";

const until = (what: string, cond: () => boolean) =>
  waitFor(cond, 5000).catch(() => {
    throw new Error(`never happened: ${what}`);
  });

/** An agent conversation the test plays: it records the resizes the wrapper sends and answers as told. */
function scriptedAgent() {
  const toWrapper = new PassThrough();
  const fromWrapper = new PassThrough();
  const resizes: Array<{ id: number; rows: number; cols: number }> = [];
  const decoder = new BinaryFrameDecoder();
  const state = { requested: false };
  fromWrapper.on("data", (d: Buffer) => {
    for (const f of decoder.push(d)) {
      if (f.kind !== FrameKind.Json) continue;
      if (!state.requested) {
        state.requested = true; // the exec.run request
        continue;
      }
      const msg = decodeRuntimeMessage(f.payload);
      if (msg?.type === "resize") resizes.push({ id: msg.id, rows: msg.rows, cols: msg.cols });
    }
  });
  const channel = new AgentChannel({ stdin: fromWrapper, stdout: toWrapper, destroy: () => toWrapper.end() });
  toWrapper.write(AGENT_READY_MARKER);
  return { channel, resizes, state, send: (m: AgentMessage) => toWrapper.write(encodeJson(m)) };
}

describe("PTY resizes on the wrapper's side", () => {
  it("resizes queued behind one in flight are coalesced: the latest size is sent, every id acknowledged once, in order", async () => {
    const agent = scriptedAgent();
    const host = {
      root: "~/.paseo-ssh",
      reattachable: true,
      openAgent: () => Promise.resolve(agent.channel),
      close: () => undefined,
    } as unknown as RemoteHost;
    const control = new PassThrough();
    const events = new PassThrough();
    const fd4: Buffer[] = [];
    events.on("data", (d: Buffer) => fd4.push(d));
    const io = { stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough() };
    control.write(
      encodeCanonical(ControlFrameSchema, {
        type: "spawn",
        protocolVersion: 1,
        runtimeInstanceId: TEST_RUNTIME_INSTANCE_ID,
        argv: ["/bin/sh"],
        env: {},
        purpose: { kind: "terminal" },
        options: { host: "127.0.0.1", user: "nobody" },
        execId: "exec-coalesce",
        stdio: { kind: "pty", rows: 24, cols: 80 },
      }),
    );
    const done = runExec("ws-coalesce", io, { openHost: () => Promise.resolve(host), fds: { control, events } });
    const resize = (id: number, rows: number, cols: number) =>
      control.write(`${JSON.stringify({ type: "resize", protocolVersion: 1, id, rows, cols })}\n`);

    await until("exec.run sent", () => agent.state.requested);
    agent.send({ type: "started", pid: 4242 });
    await until("fd4 started", () => Buffer.concat(fd4).toString().includes('"started"'));
    resize(1, 30, 100);
    await until("resize 1 sent", () => agent.resizes.length === 1);
    // Two more while the first is not answered yet: they wait, and only the last size goes out.
    resize(2, 31, 101);
    resize(3, 32, 102);
    await until("fd3 read", () => control.readableLength === 0);
    agent.send({ type: "resized", id: 1, ok: true });
    await until("a second resize sent", () => agent.resizes.length === 2);
    agent.send({ type: "resized", id: 3, ok: true });
    await until("three fd4 resized", () => Buffer.concat(fd4).toString().split('"resized"').length === 4);
    agent.send({ type: "exit", code: 0, signal: null });
    expect(await done).toBe(0);

    expect(agent.resizes).toEqual([
      { id: 1, rows: 30, cols: 100 },
      { id: 3, rows: 32, cols: 102 },
    ]);
    const fd4Events = decodeFrames(Buffer.concat(fd4).toString(), ProcessEventSchema);
    expect(fd4Events.map((e) => (e.type === "resized" ? `resized ${e.id}` : e.type))).toEqual([
      "started",
      "resized 1",
      "resized 2",
      "resized 3",
      "eof",
      "exit",
    ]);
  }, 30_000);
});
