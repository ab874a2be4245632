// A minimal NDJSON client for the helper's `watch` session, standing in for Paseo's client in
// tests: it records every event line and waits for specific ones with bounded timeouts.
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { collect, startHelper, type RunResult } from "./helper.js";

export type WatchLine = Record<string, unknown>;

export class WatchClient {
  readonly lines: WatchLine[] = [];
  readonly exited: Promise<RunResult>;
  private readonly child: ChildProcessWithoutNullStreams;
  private buffered = "";
  private waiters: Array<() => void> = [];

  constructor(cwd: string) {
    this.child = startHelper(["watch"], { cwd });
    this.child.stdin.on("error", () => undefined);
    this.exited = collect(this.child, 30_000);
    this.child.stdout.on("data", (chunk: Buffer) => {
      this.buffered += chunk.toString("utf8");
      let newline: number;
      while ((newline = this.buffered.indexOf("\n")) !== -1) {
        this.lines.push(JSON.parse(this.buffered.slice(0, newline)) as WatchLine);
        this.buffered = this.buffered.slice(newline + 1);
      }
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  write(text: string): void {
    this.child.stdin.write(text);
  }

  send(command: WatchLine): void {
    this.write(`${JSON.stringify(command)}\n`);
  }

  subscribe(id: string, paths: string[], recursive = false, ignoredPaths: string[] = []): Promise<WatchLine> {
    const from = this.lines.length;
    this.send({ protocolVersion: 1, type: "subscribe", id, paths, recursive, ignoredPaths });
    return this.waitFor((l) => l.type === "subscribed" && l.subscriptionId === id, 5000, from);
  }

  end(text?: string): void {
    this.child.stdin.end(text);
  }

  kill(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Resolves with the first line (from `from` on) matching `predicate`. */
  async waitFor(predicate: (line: WatchLine) => boolean, timeoutMs = 5000, from = 0): Promise<WatchLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.slice(from).find(predicate);
      if (found !== undefined) return found;
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`no matching watch line within ${timeoutMs} ms; saw ${JSON.stringify(this.lines)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  changes(id: string, from = 0): string[][] {
    return this.lines
      .slice(from)
      .filter((l) => l.type === "changed" && l.subscriptionId === id)
      .map((l) => l.paths as string[]);
  }

  /** Ends the session with `close` and returns its exit. */
  async close(): Promise<RunResult> {
    this.end(`${JSON.stringify({ protocolVersion: 1, type: "close" })}\n`);
    return this.exited;
  }
}
