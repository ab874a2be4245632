// The fault proxy the link-loss tests and the benchmark put in front of sshd: it must really
// break links the way networks do, or the tests built on it prove nothing.
import { createServer, connect, type Server, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { startDelayProxy, type DelayProxy } from "../../bench/delay-proxy.mjs";

const cleanups = suite();

async function echoServer(): Promise<{ port: number; accepted: () => number }> {
  let accepted = 0;
  const server: Server = createServer((s) => {
    accepted++;
    s.on("error", () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise((r) => server.close(r)));
  return { port: (server.address() as { port: number }).port, accepted: () => accepted };
}

async function through(proxy: DelayProxy): Promise<{ sock: Socket; received: () => string; events: string[] }> {
  const sock = connect({ host: "127.0.0.1", port: proxy.port });
  const events: string[] = [];
  let text = "";
  sock.on("data", (d: Buffer) => (text += d.toString()));
  sock.on("error", (e: NodeJS.ErrnoException) => events.push(`error:${e.code}`));
  sock.on("close", () => events.push("close"));
  cleanups.push(() => sock.destroy());
  await new Promise((r) => sock.once("connect", r));
  return { sock, received: () => text, events };
}

const until = async (cond: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe("delay proxy records", () => {
  it("onForward reports each chunk it passes on, with its direction and size, in order", async () => {
    const echo = await echoServer();
    const seen: Array<{ direction: string; bytes: number; receivedAt: number; sentAt: number }> = [];
    const proxy = await startDelayProxy({ targetPort: echo.port, delayMs: 5, onForward: (e) => seen.push(e) });
    cleanups.push(() => proxy.close());
    const c = await through(proxy);
    c.sock.write("hello");
    await until(() => c.received() === "hello");
    expect(seen.map((e) => [e.direction, e.bytes])).toEqual([
      ["up", 5],
      ["down", 5],
    ]);
    for (const e of seen) expect(e.sentAt).toBeGreaterThanOrEqual(e.receivedAt);
    expect(seen[1]!.receivedAt).toBeGreaterThanOrEqual(seen[0]!.sentAt);
  });
});

describe("delay proxy faults", () => {
  it("a blackhole holds bytes both ways until it ends, then delivers them in order", async () => {
    const echo = await echoServer();
    const proxy = await startDelayProxy({ targetPort: echo.port, delayMs: 0 });
    cleanups.push(() => proxy.close());
    const c = await through(proxy);
    c.sock.write("a");
    await until(() => c.received() === "a");
    const end = proxy.blackhole();
    c.sock.write("b");
    c.sock.write("c");
    await new Promise((r) => setTimeout(r, 300));
    expect(c.received()).toBe("a");
    end();
    await until(() => c.received() === "abc");
    expect(c.events).toEqual([]);
  });

  it("a connection opened during a blackhole reaches the target only when it ends", async () => {
    const echo = await echoServer();
    const proxy = await startDelayProxy({ targetPort: echo.port, delayMs: 0 });
    cleanups.push(() => proxy.close());
    const end = proxy.blackhole();
    const c = await through(proxy);
    c.sock.write("x");
    await new Promise((r) => setTimeout(r, 300));
    expect(echo.accepted()).toBe(0);
    expect(c.received()).toBe("");
    end();
    await until(() => c.received() === "x");
    expect(echo.accepted()).toBe(1);
  });

  it("cutAll with reset ends every connection with ECONNRESET; new connections still work", async () => {
    const echo = await echoServer();
    const proxy = await startDelayProxy({ targetPort: echo.port, delayMs: 0 });
    cleanups.push(() => proxy.close());
    const c = await through(proxy);
    c.sock.write("1");
    await until(() => c.received() === "1");
    proxy.cutAll({ reset: true });
    await until(() => c.events.includes("close"));
    expect(c.events).toContain("error:ECONNRESET");
    const d = await through(proxy);
    d.sock.write("2");
    await until(() => d.received() === "2");
  });
});
