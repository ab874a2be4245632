// The `exec` wrapper (docs/contract.md#exec): Paseo's fd0–fd4 on this side, one agent conversation (and, for
// PTY, one SSH pty channel) on the other.
//
//  * Refusals (invalid envelope, not ready, bad cwd, reused exec id, unreachable host) throw before
//    any fd4 event, so the dispatcher prints one stderr line and exits non-zero.
//  * `started` is written only when the agent says the identity is on disk (signalable).
//  * `eof` follows the workload's exit once everything it wrote has been handed to fd1/fd2 (PTY:
//    once the pty channel closed, bounded); then `exit` with the agent's real wait status, and our
//    own exit status mirrors it.
//  * PTY controls (resize, signal) are processed after `started`, one resize at a time: applied
//    with an SSH window-change, confirmed on the remote terminal, then acknowledged.
//  * Any failure after `started` kills the execution first and then writes one fd4 `error`.
// What both modes share is exec-conversation.ts; pipes-conversation.ts and pty-conversation.ts add
// how workload bytes and resizes travel in each.
import type { Readable, Writable } from "node:stream";
import type { RemoteHost } from "../transport/host.js";
import { parseRuntimeOptions, type RuntimeOptions } from "../transport/options.js";
import { readControls } from "./controls.js";
import { EventWriter } from "./events.js";
import { openControlIn, openEventsOut } from "./fds.js";
import { WrapperSignals } from "./wrapper-signals.js";
import type { ConversationParts, ExecStreams } from "./exec-conversation.js";
import { PipesConversation } from "./pipes-conversation.js";
import { PtyConversation } from "./pty-conversation.js";
import { ExecLink } from "./exec-link.js";
import { keptToken, newResumeToken, wantsResume } from "./reattach-rules.js";
import { isPoolOptions, onPoolHost } from "../workspace/pool/detect.js";

export type { ExecStreams };

export interface ExecDeps {
  /** `first`: the first agent conversation's broker header (written with the connect). */
  openHost(options: RuntimeOptions, first?: { session?: string; failFast?: boolean }): Promise<RemoteHost>;
  fds?: { control: Readable; events: Writable };
}

export async function runExec(workspaceId: string, io: ExecStreams, deps: ExecDeps): Promise<number> {
  const signals = new WrapperSignals();
  const controls = readControls(deps.fds?.control ?? openControlIn());
  const events = new EventWriter(deps.fds?.events ?? openEventsOut());
  try {
    const envelope = await controls.envelope;
    const pool = isPoolOptions(envelope.options);
    const located = pool
      ? await (await import("../workspace/pool/locate.js")).locateWorkspace(envelope.options, envelope.runtimeInstanceId, workspaceId)
      : null;
    const options = located?.options ?? parseRuntimeOptions(envelope.options);
    // A pool host's failure to open names the host (hosts[i] user@host:port), as every other operation's does.
    const onHost = <T>(fn: () => Promise<T>) => onPoolHost(located?.label, fn);
    const { stdio } = envelope;
    // Execs survive a lost link (through the broker, which reconnects), pipes and terminals the
    // host daemon owns alike; an sshd-owned PTY does not (reattach-rules.ts). The token goes with
    // the connect.
    const candidate = wantsResume(options.reconnectGraceMs) ? newResumeToken() : null;
    // A pool's workspace fails fast with its host down (its re-attachments still wait out an outage).
    const host = await onHost(() =>
      deps.openHost(options, { ...(candidate ? { session: candidate } : {}), ...(pool ? { failFast: true } : {}) }),
    );
    try {
      const token = keptToken(candidate, host.reattachable);
      const ch = await onHost(() => host.openAgent(token ? { session: token } : {}));
      const link = new ExecLink(host, ch, {
        token,
        graceMs: options.reconnectGraceMs,
        hostName: located?.label ?? options.host,
        failFastUntilHeard: pool,
      });
      const parts: ConversationParts = {
        workspaceId,
        envelope,
        host,
        link,
        io,
        events,
        signals,
        controls,
        ...(token ? { resume: { token, graceMs: options.reconnectGraceMs } } : {}),
      };
      const conversation = stdio.kind === "pty" ? new PtyConversation(parts, stdio) : new PipesConversation(parts);
      return await conversation.run();
    } finally {
      host.close();
    }
  } finally {
    signals.detach();
    controls.close();
  }
}
