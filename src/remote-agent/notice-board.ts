// The host daemon's one way to tell the Paseo side something without being asked (ports a
// workspace listens on; later: refs that moved, relays): code anywhere in the daemon publishes the
// current state of a (kind, key), and every notices stream the broker opened (agent-api.ts
// NoticesHeader) gets a snapshot of all of it on open, then each change. A stream that falls
// behind (its peer reads slowly) gets no backlog: once it drains, one fresh snapshot replaces
// whatever it missed, so memory stays bounded by the state, not by the changes.
import { encodeJson, BinaryFrameDecoder } from "../shared/frames.js";
import type { NoticeMessage } from "../shared/agent-api.js";
import type { MuxStream } from "../shared/mux.js";
import { NoticeTable, goneNotice } from "../shared/notices.js";

class NoticeBoard {
  private readonly table = new NoticeTable();
  /** Open notices streams; `behind`: a snapshot is owed once the stream drains. */
  private readonly streams = new Map<MuxStream, { behind: boolean }>();

  /** Open notices streams (they are not work: the daemon's idle rule leaves them out). */
  get subscribers(): number {
    return this.streams.size;
  }

  /** The current state of `key` in `kind` (null: it has none any more); unchanged state is not sent again. */
  publish(kind: string, key: string, payload: Record<string, unknown> | null): void {
    const change = this.table.apply(payload ? { ...payload, kind, key } : goneNotice(kind, key));
    if (!change) return;
    for (const stream of this.streams.keys()) this.send(stream, { type: "notice", notice: change });
  }

  /** Serves one notices stream until either side ends it. */
  subscribe(stream: MuxStream): void {
    this.streams.set(stream, { behind: false });
    // Nothing is expected from the broker; what arrives is read (and dropped) so credit flows.
    const decoder = new BinaryFrameDecoder();
    stream.on("data", (d) => {
      try {
        decoder.push(d);
      } catch {
        stream.reset("error", "the notices stream takes no input");
      }
    });
    stream.on("end", () => stream.end());
    stream.once("close", () => this.streams.delete(stream));
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
