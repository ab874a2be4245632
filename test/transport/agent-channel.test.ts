// The runtime's side of one agent conversation, as pure logic over in-memory streams: a
// conversation lost at once (a broker writes its ready marker and the loss's error frame in one
// chunk, before the operation sends its request) answers that request with the loss, not with
// "closed"; a request on a channel that closed already fails at once, naming the host, instead
// of waiting out its timeout. (The real-link case: test/broker/broker.test.ts, a link that stays down.)
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { AGENT_READY_MARKER, encodeJson } from "../../src/shared/frames.js";
import { AgentChannel } from "../../src/transport/agent-channel.js";

function channelOver() {
  const toRuntime = new PassThrough();
  const fromRuntime = new PassThrough();
  const ch = new AgentChannel(
    { stdin: fromRuntime, stdout: toRuntime, destroy: () => toRuntime.destroy() },
    { peer: "build.example:2222" },
  );
  return { ch, toRuntime };
}

/** A ping on `ch` is refused with `expected` without waiting for its 10 s timeout. */
async function refusedAtOnce(ch: AgentChannel, expected: { errorClass: string; message: string }): Promise<void> {
  const started = Date.now();
  await expect(ch.request({ op: "ping", root: "~/paseo" }, 10_000)).rejects.toMatchObject(expected);
  expect(Date.now() - started).toBeLessThan(1000);
}

describe("agent channel", () => {
  it("an error frame that arrived with the ready marker answers the next request", async () => {
    const { ch, toRuntime } = channelOver();
    const lost = { errorClass: "network", message: "connection to build.example:2222 was lost (the channel closed)" };
    toRuntime.end(Buffer.concat([AGENT_READY_MARKER, encodeJson({ type: "error", ...lost })]));
    await ch.ready;
    await new Promise((r) => setImmediate(r));
    await refusedAtOnce(ch, lost);
  });

  it("a request on a channel that closed already fails at once and names the host", async () => {
    const { ch, toRuntime } = channelOver();
    toRuntime.end(AGENT_READY_MARKER);
    await ch.ready;
    await new Promise((r) => setImmediate(r));
    expect(ch.closed).toBe(true);
    await refusedAtOnce(ch, { errorClass: "network", message: "connection to the remote agent on build.example:2222 closed during ping" });
  });

  it("a channel that closes while a request waits names the host and the op", async () => {
    const { ch, toRuntime } = channelOver();
    toRuntime.write(AGENT_READY_MARKER);
    await ch.ready;
    const answer = ch.request({ op: "ping", root: "~/paseo" }, 10_000);
    toRuntime.end();
    await expect(answer).rejects.toThrow("connection to the remote agent on build.example:2222 closed during ping");
  });
});
