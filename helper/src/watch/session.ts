// The long-lived `watch` sub-command (docs/contract.md#helper-watch): NDJSON commands on stdin, events on stdout.
// Lines are handled strictly in order, each fully set up before the next is read; any
// malformed command is fatal so that Paseo relaunches a clean watcher.
import { writeResult } from "../output.js";
import { Subscription, type WatchEvent } from "./subscription.js";

type Outcome = "continue" | "close";

function parseCommand(line: string): Record<string, unknown> {
  const command: unknown = JSON.parse(line);
  if (command === null || typeof command !== "object" || Array.isArray(command)) {
    throw new Error("Unsupported workspace-helper protocol");
  }
  const record = command as Record<string, unknown>;
  if (record.protocolVersion !== 1) throw new Error("Unsupported workspace-helper protocol");
  if (Object.prototype.hasOwnProperty.call(record, "root")) {
    throw new Error("Watch subscriptions cannot supply a root");
  }
  return record;
}

export class WatchSession {
  private readonly subscriptions = new Map<unknown, Subscription>();

  constructor(private readonly root: string) {}

  private emit = (event: WatchEvent): void => writeResult(event);

  closeAll(): void {
    for (const subscription of this.subscriptions.values()) subscription.close();
    this.subscriptions.clear();
  }

  async handle(line: string): Promise<Outcome> {
    const command = parseCommand(line);
    switch (command.type) {
      case "close":
        return "close";
      case "unsubscribe":
        this.subscriptions.get(command.id)?.close();
        this.subscriptions.delete(command.id);
        writeResult({ type: "unsubscribed", subscriptionId: command.id });
        return "continue";
      case "subscribe": {
        this.subscriptions.get(command.id)?.close();
        this.subscriptions.delete(command.id);
        const subscription = await Subscription.open(
          this.root,
          {
            id: command.id,
            paths: command.paths,
            recursive: command.recursive === true,
            ignoredPaths: command.ignoredPaths,
          },
          this.emit,
        );
        this.subscriptions.set(command.id, subscription);
        writeResult({ type: "subscribed", subscriptionId: command.id });
        return "continue";
      }
      default:
        return "continue";
    }
  }
}

/** Runs until `close` or stdin EOF; throws on a fatal command. Watchers are closed either way. */
export async function runWatch(root: string): Promise<void> {
  const session = new WatchSession(root);
  writeResult({ type: "ready" });
  process.stdin.setEncoding("utf8");
  let pending = "";
  try {
    for await (const chunk of process.stdin) {
      pending += chunk as string;
      let newline: number;
      while ((newline = pending.indexOf("\n")) !== -1) {
        const line = pending.slice(0, newline).replace(/\r$/, "");
        pending = pending.slice(newline + 1);
        if ((await session.handle(line)) === "close") return;
      }
    }
    if (pending !== "") await session.handle(pending.replace(/\r$/, ""));
  } finally {
    session.closeAll();
  }
}
