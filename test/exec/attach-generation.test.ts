// The attach-generation rule of a resumable exec (src/shared/exec-session-core.ts) in the daemon's session
// (pure logic, fake conversations): an abandon issued for an attachment older than the latest one
// the wrapper asked for is ignored — the wrapper is alive — while one for the latest attachment
// (or for exec.run's conversation before any re-attach) reaps the exec.
import { describe, expect, it } from "vitest";
import { ExecSession, findSession } from "../../src/remote-agent/exec/exec-session.js";
import type { AgentContext, ConversationEnd } from "../../src/remote-agent/context.js";
import { abandonApplies } from "../../src/shared/exec-session-core.js";
import type { AgentMessage } from "../../src/shared/agent-api.js";

/** A conversation whose end the test triggers. */
function conversation(): { ctx: AgentContext; sent: AgentMessage[]; close(how: ConversationEnd): void } {
  const sent: AgentMessage[] = [];
  const closers: Array<(how: ConversationEnd) => void> = [];
  const ctx: AgentContext = {
    request: { op: "exec.run", root: "/r" },
    root: "/r",
    agentDir: "/r/agent/x",
    nodePath: process.execPath,
    sendJson: (m) => void sent.push(m),
    sendRaw: () => true,
    drained: () => Promise.resolve(),
    onFrame: () => undefined,
    pauseInput: () => undefined,
    resumeInput: () => undefined,
    onClose: (l) => void closers.push(l),
  };
  return { ctx, sent, close: (how) => closers.forEach((l) => l(how)) };
}

let n = 0;
const token = () => (++n).toString(16).padStart(32, "0");

/** A registered resumable session whose first stream was lost with the link (detached). */
function detachedSession(t: string): { session: ExecSession; lost: ConversationEnd[] } {
  const first = conversation();
  const session = new ExecSession(first.ctx, { token: t, graceMs: 60_000 });
  session.register();
  const lost: ConversationEnd[] = [];
  session.context.onClose((how) => lost.push(how));
  first.close("link-lost");
  return { session, lost };
}

describe("attach generations", () => {
  it("the rule: an abandon applies to its own generation or a later one, never to an earlier one", () => {
    expect(abandonApplies(0, 0)).toBe(true);
    expect(abandonApplies(3, 3)).toBe(true);
    expect(abandonApplies(4, 3)).toBe(true);
    expect(abandonApplies(2, 3)).toBe(false);
  });

  it("an abandon for an attachment older than the latest one is ignored; the exec stays attached and findable", () => {
    const t = token();
    const { session, lost } = detachedSession(t);
    const second = conversation();
    void session.attach(second.ctx, 0, 2);
    expect(second.sent[0]).toEqual({ type: "attached", received: 0 });
    session.abandon(1);
    session.abandon(0);
    expect(lost).toEqual([]);
    expect(findSession(t)).toBe(session);
    // The latest attachment's own client going away does reap it.
    session.abandon(2);
    expect(lost).toEqual(["client-gone"]);
    expect(findSession(t)).toBeUndefined();
  });

  it("an attach that fails still counts: the wrapper asking for it is alive", () => {
    const t = token();
    const { session, lost } = detachedSession(t);
    // It claims a frame the daemon never sent: refused, but generation 5 was asked for.
    expect(() => session.attach(conversation().ctx, 99, 5)).toThrow(/the wrapper holds frame 99/);
    session.abandon(4);
    expect(lost).toEqual([]);
    session.abandon(5);
    expect(lost).toEqual(["client-gone"]);
  });

  it("with no re-attach yet, an abandon of exec.run's conversation (generation 0) reaps the exec", () => {
    const { session, lost } = detachedSession(token());
    session.abandon(0);
    expect(lost).toEqual(["client-gone"]);
  });
});
