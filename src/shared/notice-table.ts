// What the host has told the Paseo side, held the same way at both ends of the notices stream
// (agent-api.ts NoticeMessage): the daemon keeps the current notice of every (kind, key) so a
// stream opened late (a reconnect, a laptop that slept) starts from a snapshot instead of a replay,
// and the broker keeps what it was told so a snapshot tells it which keys went away meanwhile.
// Pure: no I/O, unit-tested on its own.
import type { Notice } from "./agent-api.js";

const id = (kind: string, key: string) => `${kind}\u0000${key}`;

export function goneNotice(kind: string, key: string): Notice {
  return { kind, key, gone: true };
}

export class NoticeTable {
  private readonly held = new Map<string, { notice: Notice; text: string }>();

  /** Keys with state, of every kind. */
  get size(): number {
    return this.held.size;
  }

  /** Every notice held (none of them `gone`), in the order their keys first appeared. */
  all(): Notice[] {
    return [...this.held.values()].map((h) => h.notice);
  }

  /** The notice held for (kind, key), if any. */
  get(kind: string, key: string): Notice | undefined {
    return this.held.get(id(kind, key))?.notice;
  }

  /** Every notice held of `kind`. */
  ofKind(kind: string): Notice[] {
    return this.all().filter((n) => n.kind === kind);
  }

  /** Takes one notice; returns it when it changes what is held, null when it repeats it. */
  apply(notice: Notice): Notice | null {
    const k = id(notice.kind, notice.key);
    if (notice.gone) return this.held.delete(k) ? goneNotice(notice.kind, notice.key) : null;
    const text = JSON.stringify(notice);
    if (this.held.get(k)?.text === text) return null;
    this.held.set(k, { notice, text });
    return notice;
  }

  /**
   * Makes the table hold exactly `snapshot`: the changes, in order, as notices (a key held before
   * and absent from the snapshot comes back as `gone`; one that did not change is not repeated).
   */
  replace(snapshot: Notice[]): Notice[] {
    const keep = new Set(snapshot.filter((n) => !n.gone).map((n) => id(n.kind, n.key)));
    const changes: Notice[] = [];
    for (const { notice } of [...this.held.values()]) {
      if (!keep.has(id(notice.kind, notice.key))) changes.push(this.apply(goneNotice(notice.kind, notice.key))!);
    }
    for (const n of snapshot) {
      if (n.gone) continue;
      const change = this.apply(n);
      if (change) changes.push(change);
    }
    return changes;
  }

  /** Forgets everything: a `gone` for every key held. */
  clear(): Notice[] {
    return this.replace([]);
  }
}
