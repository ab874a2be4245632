// The broker's end of the notices stream (agent-api.ts NoticesHeader): the one way the host daemon
// tells the Paseo side something it did not ask for. Each kind of notice has one handler
// (`onNotice`); the registry knows nothing of what a kind or a key means (the broker knows nothing
// of workspaces): it keeps what it was told (src/shared/notice-table.ts), so a snapshot after a
// reconnect comes to each handler as just the changes, keys that vanished meanwhile as `gone`.
// The host's asks arrive on the same stream: one handler per topic (`onAsk`), whose answer goes
// back on the stream the ask came on; the topics with a handler are declared when the stream opens.
import { EventEmitter } from "node:events";
import {
  NoticeMessage,
  noticeProblem,
  type AskAnswer,
  type HostAskTopic,
  type KindNotice,
  type Notice,
  type NoticeKind,
} from "../../shared/agent-api.js";
import { BinaryFrameDecoder, FrameKind, encodeJson } from "../../shared/frames.js";
import { parseJson } from "../../shared/guards.js";
import type { MuxStream } from "../../shared/mux.js";
import { NoticeTable, goneNotice } from "../../shared/notice-table.js";

export type NoticeHandler<K extends NoticeKind = NoticeKind> = (notice: KindNotice<K>) => void;

/** Answers one ask of its topic (null: no answer); it must settle within its own bound. */
export type AskHandler = (body: unknown) => Promise<unknown>;

/** What a handler may add to the answer of a client's `notices` request about one notice. */
export type NoticeView<K extends NoticeKind = NoticeKind> = (notice: KindNotice<K>) => Record<string, unknown>;

export class NoticeRegistry extends EventEmitter<{ log: [string]; link: [boolean] }> {
  /** By kind; the table's notices are handed over only once accepted() checked them. */
  private readonly handlers = new Map<
    string,
    { handle: (n: Notice) => void; view?: (n: Notice) => Record<string, unknown>; keepsAlive: boolean }
  >();
  private readonly askHandlers = new Map<HostAskTopic, AskHandler>();
  /** Holds taken by handlers with work in progress (hold()). */
  private holds = 0;
  private readonly table = new NoticeTable();
  /** The stream notices arrive on now (the newest channel's); null while there is none. */
  private current: MuxStream | null = null;
  /** The current stream's snapshot arrived: what the table holds is the host's state now. */
  private synced = false;

  /**
   * One handler per kind: every change of a key of that kind, a snapshot's as well. `keepsAlive`
   * (default true): while a key of the kind holds state, the broker stays up and reconnects (a
   * forwarded port must keep answering); a kind whose state only matters while the host's daemon
   * runs anyway (work that moved: only its execs move it) says false.
   */
  onNotice<K extends NoticeKind>(kind: K, handle: NoticeHandler<K>, view?: NoticeView<K>, opts: { keepsAlive?: boolean } = {}): void {
    if (this.handlers.has(kind)) throw new Error(`notices of kind ${kind} already have a handler`);
    this.handlers.set(kind, {
      handle: handle as (n: Notice) => void,
      ...(view ? { view: view as (n: Notice) => Record<string, unknown> } : {}),
      keepsAlive: opts.keepsAlive ?? true,
    });
  }

  /** One handler per ask topic; registered before the first stream opens (the header declares them). */
  onAsk(topic: HostAskTopic, handle: AskHandler): void {
    if (this.askHandlers.has(topic)) throw new Error(`asks of topic ${topic} already have a handler`);
    this.askHandlers.set(topic, handle);
  }

  /** The ask topics this broker answers (the notices stream's header says them to the daemon). */
  get answers(): HostAskTopic[] {
    return [...this.askHandlers.keys()];
  }

  /** Keys that keep the broker up, and handlers' work in progress: while there are any, the broker stays up and reconnects. */
  get live(): number {
    return this.table.all().filter((n) => this.handlers.get(n.kind)?.keepsAlive !== false).length + this.holds;
  }

  /** Keeps the broker up until the returned release is called (a handler's work in progress). */
  hold(): () => void {
    this.holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.holds--;
    };
  }

  /** Whether the host's notices are arriving now (a stream is open and its snapshot was read). */
  get up(): boolean {
    return this.current !== null && this.synced;
  }

  /** Resolves once notices are arriving (or after `ms`). */
  whenUp(ms: number): Promise<void> {
    if (this.up) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (up: boolean) => {
        if (!up) return;
        clearTimeout(timer);
        this.off("link", done);
        resolve();
      };
      const timer = setTimeout(() => {
        this.off("link", done);
        resolve();
      }, ms);
      this.on("link", done);
    });
  }

  /** What is held of `kind` (of `key` only, when given), with what its handler adds. */
  describe(kind: string, key?: string): Array<Record<string, unknown>> {
    const view = this.handlers.get(kind)?.view;
    return this.table
      .ofKind(kind)
      .filter((n) => key === undefined || n.key === key)
      .map((n) => ({ ...n, ...(view ? view(n) : {}) }));
  }

  /** Reads notices from `stream` (a newer channel's stream replaces the one before). */
  attach(stream: MuxStream): void {
    const before = this.current;
    this.current = stream;
    this.synced = false;
    before?.end();
    const decoder = new BinaryFrameDecoder();
    stream.on("data", (d) => {
      try {
        for (const f of decoder.push(d)) if (f.kind === FrameKind.Json) this.take(stream, parseJson(f.payload));
      } catch (err) {
        this.emit("log", `notices stream: ${(err as Error).message}`);
        stream.reset("error", "malformed notices");
      }
    });
    stream.on("end", () => stream.end());
    stream.once("close", (info) => {
      if (this.current !== stream) return;
      this.current = null;
      this.synced = false;
      if (info.reason !== null) this.emit("log", `notices stream closed: ${info.message ?? info.reason}`);
      this.emit("link", false);
    });
  }

  private take(stream: MuxStream, message: unknown): void {
    if (!NoticeMessage(message)) throw new Error("a message that is not a notice");
    if (message.type === "ask") return void this.answer(stream, message.id, message.topic, message.body);
    if (stream !== this.current) return;
    if (message.type === "snapshot") {
      const held = message.notices.map((n) => this.accepted(n as Notice)).filter((n): n is Notice => n !== null && !n.gone);
      this.dispatch(this.table.replace(held));
      this.synced = true;
      this.emit("link", true);
      return;
    }
    const notice = this.accepted(message.notice as Notice);
    const change = notice && this.table.apply(notice);
    if (change) this.dispatch([change]);
  }

  /**
   * The notice as this broker takes it: one of a kind the protocol does not declare is dropped
   * (null), and a malformed one stands for its key's having no state the broker can use (gone):
   * a forward is never kept on the strength of a report that could not be read.
   */
  private accepted(n: Notice): Notice | null {
    const found = noticeProblem(n);
    if (found === null) return n;
    this.emit("log", `notices stream: ignored ${found.why}`);
    return found.problem === "unknown" ? null : goneNotice(n.kind, n.key);
  }

  /** Runs the topic's handler (the broker stays up meanwhile) and sends its answer back where the ask came from. */
  private async answer(stream: MuxStream, id: number, topic: string, body: unknown): Promise<void> {
    const handle = this.askHandlers.get(topic as HostAskTopic);
    const release = this.hold();
    let answer: unknown = null;
    try {
      if (handle) answer = await handle(body);
    } catch (err) {
      this.emit("log", `answering an ask of topic ${topic} failed: ${(err as Error).message}`);
    } finally {
      release();
    }
    if (!stream.closed) stream.write(encodeJson({ type: "answer", id, body: answer ?? null } satisfies AskAnswer));
  }

  private dispatch(changes: Notice[]): void {
    for (const n of changes) {
      try {
        this.handlers.get(n.kind)?.handle(n);
      } catch (err) {
        this.emit("log", `handling a notice of kind ${n.kind} failed: ${(err as Error).message}`);
      }
    }
  }

  /** The host is out of reach for good (or the broker stops): every key is gone. */
  reset(): void {
    this.current?.end();
    this.current = null;
    this.synced = false;
    this.dispatch(this.table.clear());
  }
}
