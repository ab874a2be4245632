// The I/O-free core of a resumable exec: the frames a conversation's two ends tell apart, the
// generation, grace and loss rules, and the three state machines that hold them: the wrapper's
// link, the daemon's exec session and the broker's client-gone queue. Each machine takes events
// and returns its next state (the daemon's and the broker's also the actions to perform); its
// adapter (src/exec/exec-link.ts, src/remote-agent/exec/exec-session.ts, the client-gone part of
// src/broker/process/channel-pool.ts) owns the timers, streams and sockets and performs them.
// Frame numbering and replay are src/shared/stream-replay.ts.
//
// When is an exec's tree reaped after a lost link? (stepSession, reapDelayMs)
//  * A resumable exec (a token and a grace > 0) whose stream is lost with the link ("link-lost",
//    "error") is *detached*: the workload runs on and nothing is reaped while the wrapper may come
//    back. It is reaped at once (reason "expired") when the reconnect grace (graceMs, at most
//    MAX_GRACE_MS) runs out undisturbed by an attach, or when the daemon can no longer be reached
//    at all (its socket path leads elsewhere and no channel is open: `unreachable`).
//  * It is reaped after ABANDON_GRACE_MS (reason "client-gone") when a client-gone notice names
//    its token with a generation no older than the latest attach the wrapper asked for
//    (abandonApplies); an older one is stale (the wrapper is alive on a newer conversation) and
//    ignored. An attach that failed still counts as asked for.
//  * A non-resumable exec (no token, a grace of 0, or a pty on sshd that dropped its right) is
//    reaped ABANDON_GRACE_MS after its stream is lost; one that dropped its right while detached
//    likewise, then.
//  * An exec whose exit (or error) frame was sent is never reaped: once the wrapper acknowledged
//    every frame, or ended its side or went away, the session simply ends.
//
// What does the broker do with a client-gone notice the daemon did not confirm? (ClientGoneQueue)
//  * A wrapper that goes away while its resumable exec's stream cannot carry the reset (the link
//    is down, or the stream was lost before the daemon confirmed the end) is queued by token with
//    its generation. Queued: unsent, or sent on one channel that may be silently dead.
//  * It is (re)sent as a `client-gone` stream on the next daemon channel: an unsent one on any, one
//    already sent only on a channel newer than the one it went out on. It leaves the queue when the
//    daemon confirms it (ends the stream), when the same conversation is opened again at a newer
//    generation (the client is alive), or after reconnectGraceMs (the daemon has reaped the exec
//    by then). A notice older than one queued, or than the latest generation opened through the
//    broker, is dropped on arrival.
//  * A failed send leaves it queued for the next flush (deliverPending, or the next channel).
// Built-ins only: the agent bundle uses this too.
import { FrameKind, type Frame } from "./frames.js";
import { isRecord, parseJson } from "./guards.js";
import { RuntimeError } from "./errors.js";

// ---------------------------------------------------------------------------------------------
// Frames

/**
 * A frame of a resumable conversation as its receiver counts it: the two control messages that
 * carry no sequence number (`ack`, `attached`) apart from every other frame, which is numbered.
 * `control`: an ack or attached message whose number is malformed (unnumbered, acted on by nobody).
 */
export type ConversationFrame =
  { kind: "ack"; seq: number } | { kind: "attached"; received: number } | { kind: "control" } | { kind: "numbered"; frame: Frame };

/** Controls are short; a longer Json frame is a message of the conversation. */
const MAX_CONTROL_BYTES = 256;

const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

export function decodeConversationFrame(f: Frame): ConversationFrame {
  if (f.kind !== FrameKind.Json || f.payload.length > MAX_CONTROL_BYTES) return { kind: "numbered", frame: f };
  const v = parseJson(f.payload);
  if (!isRecord(v)) return { kind: "numbered", frame: f };
  if (v.type === "ack") return isCount(v.seq) ? { kind: "ack", seq: v.seq } : { kind: "control" };
  if (v.type === "attached") return isCount(v.received) ? { kind: "attached", received: v.received } : { kind: "control" };
  return { kind: "numbered", frame: f };
}

// ---------------------------------------------------------------------------------------------
// Generation, grace and loss rules

/**
 * The next attach generation. The wrapper numbers its conversations of one exec (exec.run is 0,
 * each attach attempt one more) and names the number to broker and daemon, so an abandon issued
 * for an earlier conversation can never reap the exec a later one re-attaches to.
 */
export function nextGen(gen: number): number {
  return gen + 1;
}

/** Whether an abandon for attachment `abandonGen` still applies once attachment `latestGen` was asked for. */
export function abandonApplies(abandonGen: number, latestGen: number): boolean {
  return abandonGen >= latestGen;
}

/**
 * Grace between losing an exec's conversation for good and killing its tree, so a killed wrapper
 * leaves no orphan. Long enough to ride out an orderly close racing the exit.
 */
export const ABANDON_GRACE_MS = 1000;

/** The longest reconnect grace (the option's bound); a timer past 2^31 ms would fire at once. */
export const MAX_GRACE_MS = 86_400_000;

/**
 * How the runtime's side of a conversation ended: "end" is an orderly close (EOF); "expired": a
 * resumable exec's stream was lost and nobody re-attached within the reconnect grace (or nobody
 * can reach the daemon any more); the others are the mux's reset reasons (its client process
 * died, the link to the Paseo host was lost, …).
 */
export type ConversationEnd = "end" | "expired" | "client-gone" | "link-lost" | "refused" | "error";

/** How long after its conversation was lost for good an exec's tree is reaped: "expired" waited its grace already. */
export function reapDelayMs(how: ConversationEnd): number {
  return how === "expired" ? 0 : ABANDON_GRACE_MS;
}

/** The grace a session may stay detached, or null when a lost stream is the exec's loss. */
export function detachGrace(resume: { graceMs: number } | null): number | null {
  return resume !== null && resume.graceMs > 0 ? Math.min(resume.graceMs, MAX_GRACE_MS) : null;
}

// ---------------------------------------------------------------------------------------------
// The wrapper's link (src/exec/exec-link.ts performs it; its backoff and messages: src/exec/reattach-rules.ts)

/** The wrapper's exec-link lifecycle (one conversation of one exec, over one stream `C` at a time). */
export type WrapperLinkState<C> =
  /** A stream carries the conversation, attached as generation `gen` (exec.run's is 0). */
  | { kind: "attached"; ch: C; gen: number }
  /** The daemon sent the exit (or error) frame: the stream still carries acks; its loss is no loss. */
  | { kind: "settling"; ch: C }
  /** The stream was lost at `since`: attempts run until the grace is over; frames sent meanwhile wait in the replay log. `gen`: the last attempt's generation. */
  | { kind: "reattaching"; since: number; gen: number }
  /** Our side ended after the exit was handed on: waiting for the stream to close. */
  | { kind: "ending"; ch: C | null }
  /** Nothing more happens: the exit was handed on, the exec was lost, or the wrapper gave up. */
  | { kind: "finished"; why: "closed" | "lost" | "destroyed" };

export type WrapperLinkEvent<C> =
  /** The exit or error frame arrived (nothing after it can need a re-attachment). */
  | { type: "final-frame" }
  /** The current stream closed. `resumable`: the exec holds a ResumeRight of kind "resumable". */
  | { type: "stream-closed"; resumable: boolean; now: number }
  /** A re-attachment attempt is starting (under the next generation). */
  | { type: "attempt" }
  /** A re-attachment succeeded on `ch`. */
  | { type: "reattached"; ch: C }
  /** Re-attaching stopped: the grace ran out or a failure no retry fixes. */
  | { type: "gave-up" }
  /** `end()`: the exit was handed on to Paseo. */
  | { type: "end" }
  /** `destroy()`: a failure is being reported, or the wrapper exits. */
  | { type: "destroy" };

/**
 * The one transition function of the exec-link's lifecycle. An event the current state cannot
 * take is a bug in the link, reported as an internal error rather than acted on.
 */
export function nextWrapperLinkState<C>(s: WrapperLinkState<C>, e: WrapperLinkEvent<C>): WrapperLinkState<C> {
  switch (e.type) {
    case "final-frame":
      if (s.kind === "attached" || s.kind === "settling") return { kind: "settling", ch: s.ch };
      break;
    case "stream-closed":
      if (s.kind === "attached") return e.resumable ? { kind: "reattaching", since: e.now, gen: s.gen } : { kind: "finished", why: "lost" };
      if (s.kind === "settling" || s.kind === "ending") return { kind: "finished", why: "closed" };
      break;
    case "attempt":
      // Every attempt is a new attach generation (nextGen, abandonApplies): an abandon a broker
      // issues for an earlier one can never reap the exec this attempt is re-attaching to. A
      // wrapper that gives up destroys its stream, which broker and daemon take as its client gone.
      if (s.kind === "reattaching") return { ...s, gen: nextGen(s.gen) };
      break;
    case "reattached":
      if (s.kind === "reattaching") return { kind: "attached", ch: e.ch, gen: s.gen };
      break;
    case "gave-up":
      if (s.kind === "reattaching") return { kind: "finished", why: "lost" };
      break;
    case "end":
      if (s.kind === "attached" || s.kind === "settling") return { kind: "ending", ch: s.ch };
      // The stream may already have closed after the daemon saw its exit acknowledged.
      if (s.kind === "finished" || s.kind === "ending") return s;
      break;
    case "destroy":
      return s.kind === "finished" ? s : { kind: "finished", why: "destroyed" };
  }
  throw new RuntimeError("remote", `internal error: the exec link cannot take "${e.type}" while ${s.kind}`);
}

/** The stream the conversation runs on now, if any. */
export function currentChannel<C>(s: WrapperLinkState<C>): C | null {
  return s.kind === "attached" || s.kind === "settling" || s.kind === "ending" ? s.ch : null;
}

/** Whether a re-attachment is still wanted (false once the exec finished or the wrapper gave up). */
export function stillReattaching<C>(s: WrapperLinkState<C>): boolean {
  return s.kind === "reattaching";
}

// ---------------------------------------------------------------------------------------------
// The daemon's exec session

/**
 * Where one exec's session is. `A`: the adapter's attachment (a conversation carrying it), owned
 * by the state that holds it and let go by a `release` action.
 */
export type SessionState<A> =
  /** A stream carries the conversation. */
  | { kind: "attached"; att: A }
  /** The stream was lost; the workload runs on while the grace timer runs. */
  | { kind: "detached"; graceMs: number }
  /** Nobody needs the session any more. `lost`: how the op heard the loss (null: it ended after its final frame). */
  | { kind: "closed"; lost: ConversationEnd | null };

export interface SessionModel<A> {
  state: SessionState<A>;
  /** The latest attach generation the wrapper asked for (exec.run is 0); older abandons are stale. */
  latestGen: number;
  /** The exit or error frame went down: a close after it is no loss. */
  finalSent: boolean;
  /** Present: a lost stream detaches the session for this long. */
  graceMs: number | null;
}

export type SessionEvent<A> =
  /** The attached stream `att` closed. */
  | { type: "stream-closed"; att: A; how: ConversationEnd }
  /** exec.attach asked for generation `gen` (counts even when it then fails). */
  | { type: "attach-asked"; gen: number }
  /** exec.attach took the session over on `att`. */
  | { type: "attached"; att: A }
  | { type: "grace-expired" }
  /** A client-gone notice: the client of attachment `gen` went away. */
  | { type: "abandon"; gen: number }
  /** No wrapper can reach this daemon any more. */
  | { type: "unreachable" }
  | { type: "final-sent" }
  /** Every frame sent down is acknowledged. */
  | { type: "all-acked" }
  /** The exec cannot outlive its stream (sshd's pty). */
  | { type: "drop-resume" };

export type SessionAction<A> =
  | { do: "start-grace"; ms: number }
  | { do: "stop-grace" }
  /** Let the attachment go (its handler returns). */
  | { do: "release"; att: A }
  /** The op hears the loss (and reaps after reapDelayMs). */
  | { do: "lose"; how: ConversationEnd }
  /** The session ends: unregister its token, settle `done`. */
  | { do: "finish" }
  | { do: "note"; line: string };

export function newSession<A>(first: A, resume: { graceMs: number } | null): SessionModel<A> {
  return { state: { kind: "attached", att: first }, latestGen: 0, finalSent: false, graceMs: detachGrace(resume) };
}

/** The one transition function of the daemon's exec session. */
export function stepSession<A>(m: SessionModel<A>, e: SessionEvent<A>): { model: SessionModel<A>; actions: SessionAction<A>[] } {
  const s = m.state;
  const out = (model: SessionModel<A>, ...actions: SessionAction<A>[]) => ({ model, actions });
  const closed = (lost: ConversationEnd | null, before: SessionAction<A>[] = [], base: SessionModel<A> = m) => {
    const actions: SessionAction<A>[] = [...before];
    if (s.kind === "detached") actions.push({ do: "stop-grace" });
    if (lost !== null) actions.push({ do: "lose", how: lost });
    if (s.kind === "attached" && !before.some((a) => a.do === "release")) actions.push({ do: "release", att: s.att });
    actions.push({ do: "finish" });
    return out({ ...base, state: { kind: "closed", lost } }, ...actions);
  };
  switch (e.type) {
    case "stream-closed": {
      if (s.kind !== "attached" || s.att !== e.att) return out(m);
      const release: SessionAction<A> = { do: "release", att: s.att };
      // The wrapper ends its side only after it wrote the exit out; a dead wrapper needs nothing more.
      if (m.finalSent && (e.how === "end" || e.how === "client-gone")) return closed(null, [release]);
      if ((e.how === "link-lost" || e.how === "error") && m.graceMs !== null) {
        return out(
          { ...m, state: { kind: "detached", graceMs: m.graceMs } },
          release,
          { do: "note", line: `an exec's stream was lost (${e.how}): detached, waiting up to ${m.graceMs} ms for its wrapper` },
          { do: "start-grace", ms: m.graceMs },
        );
      }
      return closed(e.how, [release]);
    }
    case "attach-asked":
      return out({ ...m, latestGen: Math.max(m.latestGen, e.gen) });
    case "attached":
      if (s.kind === "closed") return out(m, { do: "release", att: e.att });
      return out(
        { ...m, state: { kind: "attached", att: e.att } },
        s.kind === "detached" ? { do: "stop-grace" } : { do: "release", att: s.att },
      );
    case "grace-expired":
      if (s.kind !== "detached") return out(m);
      return closed("expired", [{ do: "note", line: `a detached exec's reconnect grace (${s.graceMs} ms) ran out: reaping it` }]);
    case "abandon":
      if (s.kind === "closed") return out(m);
      if (!abandonApplies(e.gen, m.latestGen)) {
        return out(m, {
          do: "note",
          line: `ignored an abandon of attachment ${e.gen}: the wrapper has asked for attachment ${m.latestGen} since`,
        });
      }
      return closed("client-gone", [{ do: "note", line: "the wrapper of a detached exec went away during the outage: reaping it" }]);
    case "unreachable":
      if (s.kind !== "detached") return out(m);
      return closed("expired", [
        { do: "note", line: "a detached exec can no longer be re-attached (this daemon's socket path leads elsewhere): reaping it" },
      ]);
    case "final-sent":
      return out(s.kind === "closed" ? m : { ...m, finalSent: true });
    case "all-acked":
      return m.finalSent && s.kind !== "closed" ? closed(null) : out(m);
    case "drop-resume": {
      const model: SessionModel<A> = { ...m, graceMs: null };
      // Already detached (the stream was lost while the exec was starting): nobody will re-attach.
      return s.kind === "detached" ? closed("link-lost", [], model) : out(model);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The broker's client-gone queue

/** One daemon channel, as the broker tells channels apart: its link and how many it had opened. */
export interface ChannelMark<L> {
  link: L;
  opened: number;
}

/** A client-gone notice the daemon has not confirmed. */
export type PendingNotice<L> =
  /** Not sent on any channel yet: any channel takes it. */
  | { kind: "unsent"; gen: number; until: number }
  /** Its reset went out on `on`, which may be silently dead: only a newer channel takes it again. */
  | { kind: "sent-on"; gen: number; until: number; on: ChannelMark<L> };

export type ClientGoneEvent<L> =
  /** The client of conversation `token` at `gen` went away; `sentOn`: its reset went out on that channel. */
  | { type: "gone"; token: string; gen: number; now: number; graceMs: number; sentOn: ChannelMark<L> | null }
  /** Conversation `token` is opened again at `gen`: its client is alive. */
  | { type: "reopened"; token: string; gen: number }
  /** The daemon confirmed `notice` (it ended the client-gone stream). */
  | { type: "confirmed"; token: string; notice: PendingNotice<L> };

export type ClientGoneAction = { do: "flush" } | { do: "log"; line: string };

/** Conversations remembered at most (each is forgotten after the grace anyway). */
export const MAX_CLIENT_GONE = 4096;

function boundedSet<K, V>(map: Map<K, V>, key: K, value: V): void {
  map.delete(key);
  if (map.size >= MAX_CLIENT_GONE) map.delete(map.keys().next().value!);
  map.set(key, value);
}

/** The broker's queue of unconfirmed client-gone notices, by token. No I/O: the pool sends what `due` names. */
export class ClientGoneQueue<L> {
  private readonly pending = new Map<string, PendingNotice<L>>();
  /** The latest generation each named conversation was opened at through this broker. */
  private readonly latestGen = new Map<string, number>();

  handle(e: ClientGoneEvent<L>): ClientGoneAction[] {
    switch (e.type) {
      case "gone": {
        // A later generation of this conversation was opened (or asked for) after this one: it is not gone.
        if ((this.latestGen.get(e.token) ?? 0) > e.gen) return [];
        const queued = this.pending.get(e.token);
        if (queued && queued.gen > e.gen) return [];
        const until = e.now + e.graceMs;
        const notice: PendingNotice<L> = e.sentOn
          ? { kind: "sent-on", gen: e.gen, until, on: e.sentOn }
          : { kind: "unsent", gen: e.gen, until };
        if (!queued && this.pending.size >= MAX_CLIENT_GONE) this.pending.delete(this.pending.keys().next().value!);
        this.pending.set(e.token, notice);
        return [{ do: "flush" }];
      }
      case "reopened": {
        const actions: ClientGoneAction[] = [];
        const queued = this.pending.get(e.token);
        if (queued && queued.gen < e.gen) {
          this.pending.delete(e.token);
          actions.push({
            do: "log",
            line: "a named conversation was opened again: the client-gone pending for its earlier generation is dropped",
          });
        }
        if ((this.latestGen.get(e.token) ?? -1) < e.gen) boundedSet(this.latestGen, e.token, e.gen);
        return actions;
      }
      case "confirmed":
        if (this.pending.get(e.token) === e.notice) this.pending.delete(e.token);
        return [{ do: "log", line: "a client that went away during an outage was reported gone to the host daemon" }];
    }
  }

  /** The notices to send on channel `now` (a notice is not sent twice on one channel). */
  due(now: ChannelMark<L>): Array<[string, PendingNotice<L>]> {
    return [...this.pending].filter(([, n]) => !(n.kind === "sent-on" && n.on.link === now.link && n.on.opened === now.opened));
  }

  /**
   * Notices still to deliver (they keep the broker alive and reconnecting), the expired forgotten.
   * One whose reset went out on a channel that is still the live one (`live`) does not count: that
   * channel would have been dropped by keepalive were it silent (then it counts again).
   */
  count(now: number, live: (on: ChannelMark<L>) => boolean): number {
    let n = 0;
    for (const [token, notice] of this.pending) {
      if (notice.until <= now) this.pending.delete(token);
      else if (!(notice.kind === "sent-on" && live(notice.on))) n++;
    }
    return n;
  }
}
