// The host daemon's one way to tell the Paseo side something without being asked (ports a
// workspace listens on; refs that moved): code anywhere in the daemon publishes the
// current state of a (kind, key), and every notices stream the broker opened (agent-api.ts
// NoticesHeader) gets a snapshot of all of it on open, then each change. A stream that falls
// behind (its peer reads slowly) gets no backlog: once it drains, one fresh snapshot replaces
// whatever it missed, so memory stays bounded by the state, not by the changes.
// The same streams carry the host's asks (agent-api.ts AskAnswer): a request to the newest broker
// that declared the topic, answered on that stream; a stream that closes answers its asks null.
import { encodeJson, BinaryFrameDecoder, FrameKind } from "../shared/frames.js";
import { AskAnswer, type HostAskTopic, type NoticeKind, type NoticeMessage, type NoticePayload } from "../shared/agent-api.js";
import { parseJson } from "../shared/guards.js";
import type { MuxStream } from "../shared/mux.js";
import { NoticeTable, goneNotice } from "../shared/notice-table.js";

/** Asks in flight at once (a host cannot queue work on the Paseo side without bound). */
const MAX_ASKS = 32;

interface PendingAsk {
  stream: MuxStream;
  done: (body: unknown) => void;
}

class NoticeBoard {
  private readonly table = new NoticeTable();
  /** Open notices streams; `behind`: a snapshot is owed once the stream drains; `answers`: its broker's ask topics. */
  private readonly streams = new Map<MuxStream, { behind: boolean; answers: readonly string[] }>();
  private readonly asks = new Map<number, PendingAsk>();
  private nextAsk = 1;

  /** Open notices streams (they are not work: the daemon's idle rule leaves them out). */
  get subscribers(): number {
    return this.streams.size;
  }

  /** The current state of `key` in `kind` (null: it has none any more); unchanged state is not sent again. */
  publish<K extends NoticeKind>(kind: K, key: string, payload: NoticePayload<K> | null): void {
    const change = this.table.apply(payload ? { ...payload, kind, key } : goneNotice(kind, key));
    if (!change) return;
    for (const stream of this.streams.keys()) this.send(stream, { type: "notice", notice: change });
  }

  /** Whether a broker that answers `topic` is listening now. */
  answers(topic: HostAskTopic): boolean {
    return this.answering(topic) !== null;
  }

  private answering(topic: HostAskTopic): MuxStream | null {
    let newest: MuxStream | null = null;
    for (const [stream, sub] of this.streams) if (!stream.closed && sub.answers.includes(topic)) newest = stream;
    return newest;
  }

  /**
   * Asks the newest broker that answers `topic`; null at once when none listens, and when its
   * stream closes or `ms` pass without an answer (a lost link never leaves the asker waiting).
   */
  ask(topic: HostAskTopic, body: unknown, ms: number): Promise<unknown> {
    const stream = this.answering(topic);
    if (!stream || this.asks.size >= MAX_ASKS) return Promise.resolve(null);
    const id = this.nextAsk++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(null), ms);
      const done = (answer: unknown) => {
        clearTimeout(timer);
        if (this.asks.delete(id)) resolve(answer);
      };
      this.asks.set(id, { stream, done });
      // Past any snapshot owed: an ask is not state, it is never dropped for a slow reader.
      stream.write(encodeJson({ type: "ask", id, topic, body } satisfies NoticeMessage));
    });
  }

  /** Serves one notices stream until either side ends it; `answers`: the topics its broker answers. */
  subscribe(stream: MuxStream, answers: readonly string[] = []): void {
    this.streams.set(stream, { behind: false, answers });
    // From the broker only answers to asks; anything else ends the stream.
    const decoder = new BinaryFrameDecoder();
    stream.on("data", (d) => {
      try {
        for (const f of decoder.push(d)) {
          const answer = f.kind === FrameKind.Json ? parseJson(f.payload) : null;
          if (!AskAnswer(answer)) throw new Error("not an answer");
          const pending = this.asks.get(answer.id);
          if (pending?.stream === stream) pending.done(answer.body);
        }
      } catch {
        stream.reset("error", "the notices stream takes only answers to asks");
      }
    });
    stream.on("end", () => stream.end());
    stream.once("close", () => {
      this.streams.delete(stream);
      for (const pending of [...this.asks.values()]) if (pending.stream === stream) pending.done(null);
    });
    this.send(stream, this.snapshot());
  }

  private snapshot(): NoticeMessage {
    return { type: "snapshot", notices: this.table.all() };
  }

  private send(stream: MuxStream, message: NoticeMessage): void {
    const sub = this.streams.get(stream);
    if (!sub || sub.behind || stream.closed) return;
    stream.write(encodeJson(message));
    if (!stream.needsDrain) return;
    sub.behind = true;
    void stream.drained().then(() => {
      sub.behind = false;
      this.send(stream, this.snapshot());
    });
  }
}

export const noticeBoard = new NoticeBoard();
