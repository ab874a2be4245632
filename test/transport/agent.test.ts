// The agent over the real sshd: bootstrap, install once per hash, reuse, concurrent installs,
// login shells that print noise, and PTY channels.
import { afterEach, describe, expect, it } from "vitest";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { connectSshHost, type SshHost } from "../../src/transport/ssh-host.js";
import { AGENT_READY_MARKER } from "../../src/shared/frames.js";
import { rig, rigOptions, uniqueTestRoot, waitFor } from "../rig/rig.js";

const hosts: SshHost[] = [];
async function open(extra: Record<string, unknown> = {}): Promise<SshHost> {
  const h = await connectSshHost(parseRuntimeOptions(rigOptions(extra)));
  hosts.push(h);
  return h;
}
/** False only if a concurrent `npm run build` changed dist/ between two connectSshHost calls. */
function sameBuild(a: SshHost, b: SshHost): boolean {
  return a.bundle.hash === b.bundle.hash;
}
afterEach(() => {
  for (const h of hosts.splice(0)) h.close();
});

describe("remote agent over sshd", () => {
  it("installs the agent once and reuses it", async () => {
    const root = uniqueTestRoot("install");
    const h = await open({ root });
    expect(await h.call("ping", {})).toEqual({ pong: true });
    expect(h.installs).toBe(1);
    expect(await h.call("ping", {})).toEqual({ pong: true });
    expect(h.installs).toBe(1);

    // A fresh process (new connection) finds the installed agent too.
    const h2 = await open({ root });
    const facts = await h2.call("facts", {});
    expect(h2.installs).toBe(sameBuild(h, h2) ? 0 : 1);
    expect(facts.root).toBe(`${rig().remoteHome}/${root.slice(2)}`);
    expect(facts.node).toMatch(/^v\d+\./);
    expect(facts.git).toMatch(/^git version/);
  });

  it("two concurrent installs into the same root both succeed", async () => {
    const root = uniqueTestRoot("race");
    const [a, b] = await Promise.all([open({ root }), open({ root })]);
    const [ra, rb] = await Promise.all([a.call("ping", {}), b.call("ping", {})]);
    expect(ra).toEqual({ pong: true });
    expect(rb).toEqual({ pong: true });
    expect(a.installs + b.installs).toBeGreaterThanOrEqual(1);
    const c = await open({ root });
    expect(await c.call("ping", {})).toEqual({ pong: true });
    expect(c.installs).toBe(sameBuild(a, c) ? 0 : 1);
  });

  it("many agents share one connection; concurrent first calls upload once", async () => {
    const h = await open({ root: uniqueTestRoot("many") });
    const results = await Promise.all(Array.from({ length: 8 }, () => h.call("ping", {})));
    expect(results).toEqual(Array(8).fill({ pong: true }));
    expect(h.installs).toBe(1);
  });

  it("rc files that print to stdout do not disturb the handshake (facts is exact JSON)", async (ctx) => {
    const r = rig();
    if (!r.noisyUser) return ctx.skip(r.noisyUserSkipReason ?? "no noisy user");
    const root = uniqueTestRoot("noisy");
    const h = await open({ user: r.noisyUser, root });
    const facts = await h.call("facts", {});
    expect(Object.keys(facts).sort()).toEqual(["arch", "freeBytes", "git", "gitLfs", "node", "nodePath", "os", "root", "terminal"]);
    expect(facts.root.endsWith(`/${r.noisyUser}/${root.slice(2)}`)).toBe(true);
    expect(h.installs).toBe(1);
  });

  it("reports a missing remoteNode as a remote-dependency error", async () => {
    const h = await open({ remoteNode: "/nonexistent/bin/node" });
    await expect(h.call("ping", {})).rejects.toMatchObject({
      errorClass: "remote-dependency",
      message: expect.stringContaining("/nonexistent/bin/node"),
    });
  });

  it("opens a PTY whose output starts after the ready marker", async (ctx) => {
    if (rig().ptySkipReason) return ctx.skip(rig().ptySkipReason!);
    const h = await open({ root: uniqueTestRoot("pty") });
    const pty = await h.openPty([], { rows: 24, cols: 80 });
    expect(h.installs).toBe(1);
    const chunks: Buffer[] = [];
    pty.output.on("data", (d: Buffer) => chunks.push(d));
    pty.setWindow(30, 100);
    // The agent does not put the terminal in raw mode here, so the tty echoes what we type.
    pty.stdin.write("typed-through-the-pty\n");
    await waitFor(() => Buffer.concat(chunks).includes("typed-through-the-pty"), 5000);
    pty.destroy();
    await pty.closed;
    expect(Buffer.concat(chunks).includes(AGENT_READY_MARKER)).toBe(false);
  });

  it("strips rc-file noise (translated to \\r\\n by the tty) before the PTY marker", async (ctx) => {
    const r = rig();
    if (!r.noisyUser) return ctx.skip(r.noisyUserSkipReason ?? "no noisy user");
    if (r.ptySkipReason) return ctx.skip(r.ptySkipReason);
    const h = await open({ user: r.noisyUser, root: uniqueTestRoot("noisypty") });
    const pty = await h.openPty([], { rows: 24, cols: 80, term: "vt100" });
    const chunks: Buffer[] = [];
    pty.output.on("data", (d: Buffer) => chunks.push(d));
    pty.stdin.write("after-marker\n");
    await waitFor(() => Buffer.concat(chunks).includes("after-marker"), 5000);
    pty.destroy();
    await pty.closed;
    expect(Buffer.concat(chunks).toString("latin1")).not.toContain("rc-noise");
  });
});
