// The exec-link's and the daemon link's lifecycles as pure transition functions: the transitions
// the links take, and the ones no state can take, which are refused as internal errors instead of
// being acted on. The rules in motion: reattach-faults.test.ts (in-process), test/daemon/resume.test.ts (sshd).
import { describe, expect, it } from "vitest";
import { PassThrough } from "node:stream";
import {
  attachRefusal,
  nextAttemptDelay,
  nextExecLinkState,
  reconnectDelay,
  RECONNECT_MAX_MS,
  RECONNECT_MIN_MS,
  type ExecLinkEvent,
  type ExecLinkState,
} from "../../src/exec/reattach-rules.js";
import { nextLinkState, type LinkState } from "../../src/transport/daemon-link.js";
import { AgentChannel } from "../../src/transport/agent-channel.js";
import { Mux } from "../../src/shared/mux.js";
import { RuntimeError } from "../../src/shared/errors.js";
import { StreamHeader } from "../../src/shared/agent-api.js";

const ch = new AgentChannel({ stdin: new PassThrough(), stdout: new PassThrough(), destroy: () => undefined }, { marker: false });
const other = new AgentChannel({ stdin: new PassThrough(), stdout: new PassThrough(), destroy: () => undefined }, { marker: false });

describe("exec-link lifecycle", () => {
  const attached: ExecLinkState = { kind: "attached", ch, gen: 0 };
  const closed = (resumable: boolean): ExecLinkEvent => ({ type: "stream-closed", resumable, now: 1000 });

  it("a lost stream is re-attached under ever newer generations, then carries on as the same conversation", () => {
    let s = nextExecLinkState(attached, closed(true));
    expect(s).toEqual({ kind: "reattaching", since: 1000, gen: 0 });
    s = nextExecLinkState(s, { type: "attempt" });
    s = nextExecLinkState(s, { type: "attempt" });
    expect(s).toMatchObject({ kind: "reattaching", gen: 2 });
    s = nextExecLinkState(s, { type: "reattached", ch: other });
    expect(s).toEqual({ kind: "attached", ch: other, gen: 2 });
    // A second outage continues the numbering: an abandon for an earlier attachment stays stale.
    s = nextExecLinkState(nextExecLinkState(s, closed(true)), { type: "attempt" });
    expect(s).toMatchObject({ kind: "reattaching", gen: 3 });
  });

  it("a loss without the right to resume, or past the grace, finishes the link as lost", () => {
    expect(nextExecLinkState(attached, closed(false))).toEqual({ kind: "finished", why: "lost" });
    expect(nextExecLinkState(nextExecLinkState(attached, closed(true)), { type: "gave-up" })).toEqual({ kind: "finished", why: "lost" });
  });

  it("after the exit frame, or once our side ended, the stream's close is no loss", () => {
    const settling = nextExecLinkState(attached, { type: "final-frame" });
    expect(settling).toEqual({ kind: "settling", ch });
    expect(nextExecLinkState(settling, closed(true))).toEqual({ kind: "finished", why: "closed" });
    const ending = nextExecLinkState(settling, { type: "end" });
    expect(ending).toEqual({ kind: "ending", ch });
    expect(nextExecLinkState(ending, closed(true))).toEqual({ kind: "finished", why: "closed" });
    // The daemon may close the stream before the exit was handed on: ending then changes nothing.
    expect(nextExecLinkState({ kind: "finished", why: "closed" }, { type: "end" })).toEqual({ kind: "finished", why: "closed" });
  });

  it("destroy finishes the link from any state", () => {
    for (const s of [attached, { kind: "reattaching", since: 0, gen: 1 } as const, { kind: "ending", ch } as const]) {
      expect(nextExecLinkState(s, { type: "destroy" })).toEqual({ kind: "finished", why: "destroyed" });
    }
  });

  it.each<[ExecLinkState, ExecLinkEvent]>([
    [attached, { type: "reattached", ch: other }],
    [attached, { type: "attempt" }],
    [attached, { type: "gave-up" }],
    [{ kind: "reattaching", since: 0, gen: 1 }, { type: "final-frame" }],
    [
      { kind: "reattaching", since: 0, gen: 1 },
      { type: "stream-closed", resumable: true, now: 0 },
    ],
    [{ kind: "reattaching", since: 0, gen: 1 }, { type: "end" }],
    [
      { kind: "finished", why: "lost" },
      { type: "reattached", ch },
    ],
    [
      { kind: "finished", why: "destroyed" },
      { type: "stream-closed", resumable: true, now: 0 },
    ],
  ])("refuses an impossible transition (%#)", (s, e) => {
    expect(() => nextExecLinkState(s, e)).toThrow(/internal error: the exec link cannot take/);
  });

  it("backs off from RECONNECT_MIN_MS to RECONNECT_MAX_MS (±25 %) and stops short of the grace's end", () => {
    for (let a = 0; a < 20; a++) {
      const d = reconnectDelay(a);
      expect(d).toBeGreaterThanOrEqual(Math.round(Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** a) * 0.75));
      expect(d).toBeLessThanOrEqual(Math.round(RECONNECT_MAX_MS * 1.25));
    }
    // The first re-attach goes at once; the next ones back off, none past the grace.
    expect(nextAttemptDelay(0, 10_000, 0)).toBe(0);
    expect(nextAttemptDelay(1, 10_000, 0)).toBeGreaterThanOrEqual(Math.round(RECONNECT_MIN_MS * 0.75));
    expect(nextAttemptDelay(0, 0, 0)).toBeNull();
    expect(nextAttemptDelay(1, 100, 0)).toBeNull();
  });
});

describe("daemon link lifecycle", () => {
  const mux = new Mux(new PassThrough(), { role: "client", build: "b", header: StreamHeader });
  const stale = new Mux(new PassThrough(), { role: "client", build: "b", header: StreamHeader });
  const opening: Promise<Mux<StreamHeader>> = new Promise(() => undefined);

  it("opens one channel at a time, loses it, opens again, and stays closed once closed", () => {
    let s: LinkState = { kind: "idle" };
    s = nextLinkState(s, { type: "open", opening });
    expect(s.kind).toBe("opening");
    s = nextLinkState(s, { type: "up", mux });
    expect(s).toEqual({ kind: "connected", mux });
    // A channel that is not the current one any more changes nothing.
    expect(nextLinkState(s, { type: "gone", mux: stale })).toBe(s);
    s = nextLinkState(s, { type: "gone", mux });
    expect(s).toEqual({ kind: "idle" });
    s = nextLinkState(nextLinkState(s, { type: "open", opening }), { type: "open-failed" });
    expect(s).toEqual({ kind: "idle" });
    s = nextLinkState(s, { type: "close" });
    expect(nextLinkState(s, { type: "up", mux })).toEqual({ kind: "closed" });
  });

  it.each<[LinkState, Parameters<typeof nextLinkState>[1]]>([
    [{ kind: "idle" }, { type: "up", mux }],
    [
      { kind: "connected", mux },
      { type: "open", opening },
    ],
    [
      { kind: "opening", opening },
      { type: "open", opening },
    ],
    [{ kind: "closed" }, { type: "open", opening }],
  ])("refuses an impossible transition (%#)", (s, e) => {
    expect(() => nextLinkState(s, e)).toThrow(/internal error: the daemon link cannot take/);
  });
});

describe("the daemon's refusal of exec.attach", () => {
  it("only the unknown-exec and replay-gap codes mean the exec cannot be resumed; another remote failure is retried", () => {
    const unknown = attachRefusal(new RuntimeError("remote", "gone", { code: "unknown-exec" }), "h");
    expect(unknown).toBeInstanceOf(RuntimeError);
    expect((unknown as RuntimeError).message).toBe("the execution on h could not be resumed: gone");
    expect((unknown as RuntimeError).code).toBe("unknown-exec");
    expect(attachRefusal(new RuntimeError("remote", "gap", { code: "replay-gap" }), "h")).toBeInstanceOf(RuntimeError);
    // Same class, same prose, no code: not taken for an unknown exec.
    expect(attachRefusal(new RuntimeError("remote", "the host daemon no longer knows this exec"), "h")).toBe(
      "the host daemon no longer knows this exec",
    );
    expect(attachRefusal(new RuntimeError("remote", "full", { code: "disk-short" }), "h")).toBe("full");
    const auth = new RuntimeError("auth", "denied");
    expect(attachRefusal(auth, "h")).toBe(auth);
  });
});
