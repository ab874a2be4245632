// The exec-session core (pure logic, no I/O): which frames go unnumbered, the daemon session's
// transitions (re-attach at a newer generation, a stale abandon ignored, loss then grace expiry
// reaps, the final frame acked ends it) and the broker's client-gone queue (a notice not confirmed
// is resent on the next newer channel only, forgotten after the grace, dropped when its
// conversation comes back). The same rules in motion: test/exec/attach-generation.test.ts,
// reattach-faults.test.ts (in-process), test/daemon/resume.test.ts (sshd).
import { describe, expect, it } from "vitest";
import { FrameKind, encodeJson } from "../../src/shared/frames.js";
import {
  ABANDON_GRACE_MS,
  ClientGoneQueue,
  MAX_GRACE_MS,
  abandonApplies,
  decodeConversationFrame,
  newSession,
  nextGen,
  reapDelayMs,
  stepSession,
  type SessionAction,
  type SessionEvent,
  type SessionModel,
} from "../../src/shared/exec-session-core.js";

const json = (v: unknown) => ({ kind: FrameKind.Json, payload: encodeJson(v).subarray(5) });

describe("conversation frames", () => {
  it("ack and attached are their own kinds; every other frame is numbered", () => {
    expect(decodeConversationFrame(json({ type: "ack", seq: 3 }))).toEqual({ kind: "ack", seq: 3 });
    expect(decodeConversationFrame(json({ type: "attached", received: 0 }))).toEqual({ kind: "attached", received: 0 });
    expect(decodeConversationFrame(json({ type: "exit", code: 0, signal: null })).kind).toBe("numbered");
    const stdout = { kind: FrameKind.Stdout, payload: Buffer.from('{"type":"ack","seq":1}') };
    expect(decodeConversationFrame(stdout)).toEqual({ kind: "numbered", frame: stdout });
  });

  it("a malformed ack is still unnumbered (counting it would shift every later frame) but carries no number", () => {
    expect(decodeConversationFrame(json({ type: "ack", seq: -1 }))).toEqual({ kind: "control" });
    expect(decodeConversationFrame(json({ type: "ack", seq: "7" }))).toEqual({ kind: "control" });
    expect(decodeConversationFrame(json({ type: "attached" }))).toEqual({ kind: "control" });
  });
});

describe("generation, grace and loss rules", () => {
  it("an abandon applies to its own generation or a later one; each attempt is a newer one", () => {
    expect(abandonApplies(3, 3)).toBe(true);
    expect(abandonApplies(2, 3)).toBe(false);
    expect(abandonApplies(2, nextGen(2))).toBe(false);
  });

  it("a tree is reaped at once after an expired grace, after ABANDON_GRACE_MS otherwise", () => {
    expect(reapDelayMs("expired")).toBe(0);
    for (const how of ["client-gone", "link-lost", "end", "error", "refused"] as const) expect(reapDelayMs(how)).toBe(ABANDON_GRACE_MS);
  });

  it("a grace of 0 or no token means no detaching; a huge grace is clamped", () => {
    expect(newSession("a", null).graceMs).toBeNull();
    expect(newSession("a", { graceMs: 0 }).graceMs).toBeNull();
    expect(newSession("a", { graceMs: 10 * MAX_GRACE_MS }).graceMs).toBe(MAX_GRACE_MS);
  });
});

type Att = string;

/** Runs events through the session machine; the final model and every action taken. */
function run(m: SessionModel<Att>, ...events: SessionEvent<Att>[]): { m: SessionModel<Att>; actions: SessionAction<Att>[] } {
  const actions: SessionAction<Att>[] = [];
  for (const e of events) {
    const r = stepSession(m, e);
    m = r.model;
    actions.push(...r.actions);
  }
  return { m, actions };
}

const does = (actions: SessionAction<Att>[]) => actions.filter((a) => a.do !== "note");

describe("the daemon's exec session", () => {
  const fresh = () => newSession<Att>("first", { graceMs: 60_000 });

  it("a lost link detaches a resumable session and starts the grace; nothing is reaped yet", () => {
    const { m, actions } = run(fresh(), { type: "stream-closed", att: "first", how: "link-lost" });
    expect(m.state).toEqual({ kind: "detached", graceMs: 60_000 });
    expect(does(actions)).toEqual([
      { do: "release", att: "first" },
      { do: "start-grace", ms: 60_000 },
    ]);
  });

  it("a re-attach at a newer generation stops the grace and carries on; an abandon of the older generation is then ignored", () => {
    const { m, actions } = run(
      fresh(),
      { type: "stream-closed", att: "first", how: "link-lost" },
      { type: "attach-asked", gen: 2 },
      { type: "attached", att: "second" },
      { type: "abandon", gen: 1 },
    );
    expect(m.state).toEqual({ kind: "attached", att: "second" });
    expect(m.latestGen).toBe(2);
    expect(actions).toContainEqual({ do: "stop-grace" });
    expect(actions.some((a) => a.do === "lose" || a.do === "finish")).toBe(false);
    expect(actions.at(-1)).toMatchObject({ do: "note", line: expect.stringMatching(/ignored an abandon of attachment 1/) });
  });

  it("an attach that fails still counts as asked for: a stale abandon stays ignored", () => {
    const { m } = run(
      fresh(),
      { type: "stream-closed", att: "first", how: "link-lost" },
      { type: "attach-asked", gen: 1 },
      { type: "abandon", gen: 0 },
    );
    expect(m.state.kind).toBe("detached");
  });

  it("an abandon of the latest generation reaps (client-gone), from detached or attached", () => {
    const detached = run(fresh(), { type: "stream-closed", att: "first", how: "link-lost" }, { type: "abandon", gen: 0 });
    expect(detached.m.state).toEqual({ kind: "closed", lost: "client-gone" });
    expect(does(detached.actions).slice(-3)).toEqual([{ do: "stop-grace" }, { do: "lose", how: "client-gone" }, { do: "finish" }]);
    const attached = run(fresh(), { type: "abandon", gen: 0 });
    expect(does(attached.actions)).toEqual([{ do: "lose", how: "client-gone" }, { do: "release", att: "first" }, { do: "finish" }]);
  });

  it("loss, then the grace expiring, reaps at once (expired); a late close or attach changes nothing", () => {
    const { m, actions } = run(
      fresh(),
      { type: "stream-closed", att: "first", how: "error" },
      { type: "grace-expired" },
      { type: "stream-closed", att: "first", how: "end" },
    );
    expect(m.state).toEqual({ kind: "closed", lost: "expired" });
    expect(does(actions).slice(-3)).toEqual([{ do: "stop-grace" }, { do: "lose", how: "expired" }, { do: "finish" }]);
    expect(run(m, { type: "attached", att: "late" }).actions).toEqual([{ do: "release", att: "late" }]);
  });

  it("a grace timer that fires after a re-attach is ignored", () => {
    const { m } = run(
      fresh(),
      { type: "stream-closed", att: "first", how: "link-lost" },
      { type: "attached", att: "second" },
      { type: "grace-expired" },
    );
    expect(m.state).toEqual({ kind: "attached", att: "second" });
  });

  it("an unreachable daemon reaps detached sessions only", () => {
    expect(run(fresh(), { type: "unreachable" }).m.state.kind).toBe("attached");
    const { m } = run(fresh(), { type: "stream-closed", att: "first", how: "link-lost" }, { type: "unreachable" });
    expect(m.state).toEqual({ kind: "closed", lost: "expired" });
  });

  it("the final frame acked ends the session without a loss; acks before it do not", () => {
    expect(run(fresh(), { type: "all-acked" }).m.state.kind).toBe("attached");
    const { m, actions } = run(fresh(), { type: "final-sent" }, { type: "all-acked" });
    expect(m.state).toEqual({ kind: "closed", lost: null });
    expect(actions).toEqual([{ do: "release", att: "first" }, { do: "finish" }]);
  });

  it("after the final frame, the wrapper ending or going away is no loss; a lost link still detaches (the exit must reach it)", () => {
    for (const how of ["end", "client-gone"] as const) {
      expect(run(fresh(), { type: "final-sent" }, { type: "stream-closed", att: "first", how }).m.state).toEqual({
        kind: "closed",
        lost: null,
      });
    }
    expect(run(fresh(), { type: "final-sent" }, { type: "stream-closed", att: "first", how: "link-lost" }).m.state.kind).toBe("detached");
  });

  it("without the right to resume, a lost link is the exec's loss", () => {
    const { m, actions } = run(newSession<Att>("first", null), { type: "stream-closed", att: "first", how: "link-lost" });
    expect(m.state).toEqual({ kind: "closed", lost: "link-lost" });
    expect(actions).toContainEqual({ do: "lose", how: "link-lost" });
  });

  it("dropping the right while detached loses the exec (link-lost); while attached, the next loss does", () => {
    const detached = run(fresh(), { type: "stream-closed", att: "first", how: "link-lost" }, { type: "drop-resume" });
    expect(detached.m.state).toEqual({ kind: "closed", lost: "link-lost" });
    const attached = run(fresh(), { type: "drop-resume" }, { type: "stream-closed", att: "first", how: "link-lost" });
    expect(attached.m.state).toEqual({ kind: "closed", lost: "link-lost" });
  });

  it("a close of a conversation that is no longer the attached one is ignored", () => {
    const { m } = run(fresh(), { type: "attached", att: "second" }, { type: "stream-closed", att: "first", how: "client-gone" });
    expect(m.state).toEqual({ kind: "attached", att: "second" });
  });
});

describe("the broker's client-gone queue", () => {
  const GRACE = 60_000;
  const chan = (link: string, opened: number) => ({ link, opened });

  it("a notice whose reset went out on a channel is not resent there, but on the next newer channel; confirmed, it is gone", () => {
    const q = new ClientGoneQueue<string>();
    expect(q.handle({ type: "gone", token: "t", gen: 0, now: 0, graceMs: GRACE, sentOn: chan("L", 1) })).toEqual([{ do: "flush" }]);
    expect(q.due(chan("L", 1))).toEqual([]);
    const due = q.due(chan("L", 2));
    expect(due.map(([t, n]) => [t, n.gen])).toEqual([["t", 0]]);
    q.handle({ type: "confirmed", token: "t", notice: due[0]![1] });
    expect(q.due(chan("L", 3))).toEqual([]);
    expect(q.count(1, () => false)).toBe(0);
  });

  it("a notice not confirmed (the send failed) stays and is due again on the next channel", () => {
    const q = new ClientGoneQueue<string>();
    q.handle({ type: "gone", token: "t", gen: 1, now: 0, graceMs: GRACE, sentOn: null });
    expect(q.due(chan("L", 1))).toHaveLength(1);
    expect(q.due(chan("L", 2))).toHaveLength(1);
    expect(q.count(0, () => false)).toBe(1);
  });

  it("it is forgotten after the grace (the daemon has reaped the exec by then)", () => {
    const q = new ClientGoneQueue<string>();
    q.handle({ type: "gone", token: "t", gen: 0, now: 1000, graceMs: GRACE, sentOn: null });
    expect(q.count(1000 + GRACE - 1, () => false)).toBe(1);
    expect(q.count(1000 + GRACE, () => false)).toBe(0);
    expect(q.due(chan("L", 9))).toEqual([]);
  });

  it("one sent on the channel that is still live does not keep the broker busy", () => {
    const q = new ClientGoneQueue<string>();
    q.handle({ type: "gone", token: "t", gen: 0, now: 0, graceMs: GRACE, sentOn: chan("L", 1) });
    expect(q.count(1, (on) => on.link === "L" && on.opened === 1)).toBe(0);
    expect(q.count(1, () => false)).toBe(1);
  });

  it("a conversation opened again at a newer generation drops the notice of the older one, and makes later ones of it stale", () => {
    const q = new ClientGoneQueue<string>();
    q.handle({ type: "gone", token: "t", gen: 1, now: 0, graceMs: GRACE, sentOn: null });
    expect(q.handle({ type: "reopened", token: "t", gen: 2 })).toMatchObject([{ do: "log" }]);
    expect(q.due(chan("L", 1))).toEqual([]);
    expect(q.handle({ type: "gone", token: "t", gen: 1, now: 0, graceMs: GRACE, sentOn: null })).toEqual([]);
    expect(q.handle({ type: "gone", token: "t", gen: 2, now: 0, graceMs: GRACE, sentOn: null })).toEqual([{ do: "flush" }]);
  });

  it("an older notice never replaces a newer queued one", () => {
    const q = new ClientGoneQueue<string>();
    q.handle({ type: "gone", token: "t", gen: 3, now: 0, graceMs: GRACE, sentOn: null });
    expect(q.handle({ type: "gone", token: "t", gen: 2, now: 0, graceMs: GRACE, sentOn: null })).toEqual([]);
    expect(q.due(chan("L", 1))[0]![1].gen).toBe(3);
  });

  it("a confirmation of a notice replaced meanwhile keeps the newer one", () => {
    const q = new ClientGoneQueue<string>();
    q.handle({ type: "gone", token: "t", gen: 0, now: 0, graceMs: GRACE, sentOn: null });
    const [[, old]] = q.due(chan("L", 1)) as [[string, ReturnType<ClientGoneQueue<string>["due"]>[number][1]]];
    q.handle({ type: "gone", token: "t", gen: 1, now: 0, graceMs: GRACE, sentOn: null });
    q.handle({ type: "confirmed", token: "t", notice: old });
    expect(q.due(chan("L", 1))[0]![1].gen).toBe(1);
  });
});
