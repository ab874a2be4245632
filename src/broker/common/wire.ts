// The broker's Unix-socket protocol. One socket connection carries one conversation:
//   broker -> client  hello line   {"v":<version>,"pid":<n>}            (sent on accept)
//   client -> broker  header line  {"kind":"agent"[,"token":<token>[,"reattach":true,"gen":<n>]][,"failFast":true]} | {"kind":"pty","args":[…],"pty":{rows,cols,term}}
//                                  | {"kind":"ping"} | {"kind":"shutdown"[,"retireDaemon":true]}
//                                  | {"kind":"notices","of":<kind>[,"key":<key>]}
//                                  (a client may send it before the hello has arrived: a broker
//                                  reads it after the hello either way)
//   broker -> client  result line  {"ok":true[,"stats":…][,"notices":[…]]} | {"ok":false,"errorClass":…,"message":…}
// then raw bytes. Agent conversations (each one stream of the host daemon's mux channel): client
// -> broker are agent frames verbatim; broker -> client is a ready marker followed by the agent's
// frames (and, if the stream is lost with its channel, one last `error` frame naming why). PTY channels: broker -> client is terminal
// output; client -> broker uses frames.ts framing (Stdin data, Json {"type":"window",rows,cols},
// Eof) so a window change never mixes with keystrokes.
import type { Socket } from "node:net";
import { RuntimeError, WIRE_ERROR_FIELDS } from "../../shared/errors.js";
import {
  arrayOf,
  intIn,
  isBoolean,
  isInteger,
  isNonEmptyString,
  isPositiveInt,
  isRecord,
  isString,
  literal,
  matching,
  nullable,
  object,
  oneOf,
  optional,
  variant,
  type Guard,
  type Infer,
} from "../../shared/guards.js";
import { MAX_ATTACH_GEN, RESUME_TOKEN } from "../../shared/stream-replay.js";
import { LineReadError, readJsonLine, type LineFailure } from "../../shared/json-lines.js";

export type { LineFailure };

export const BrokerRequestSchema = variant("kind", {
  /**
   * `token`: the resume token of the exec this conversation carries (see RemoteHost.openAgent);
   * `reattach`: it re-attaches to that exec, and waits here while the link is down; `gen`: its
   * attach generation (src/shared/stream-replay.ts; absent: 0, the exec.run conversation).
   */
  agent: object({
    kind: literal("agent"),
    token: optional(matching(RESUME_TOKEN)),
    reattach: optional(isBoolean),
    gen: optional(intIn(0, MAX_ATTACH_GEN)),
    /** A pool's operation: with the link down it fails once connectTimeoutMs passed, not after the reconnect window (channel-pool.ts primary). */
    failFast: optional(isBoolean),
  }),
  pty: object({
    kind: literal("pty"),
    args: arrayOf(isString),
    pty: object({ rows: isPositiveInt, cols: isPositiveInt, term: optional(isString) }),
  }),
  ping: object({ kind: literal("ping") }),
  /** What the host daemon's notices of kind `of` (of `key` only, when given) say now, with what the broker made of them. */
  notices: object({ kind: literal("notices"), of: isNonEmptyString, key: optional(isString) }),
  /** `retireDaemon`: the host daemon is asked to exit as soon as nothing runs on it (the demo leaves nothing behind). */
  shutdown: object({ kind: literal("shutdown"), retireDaemon: optional(isBoolean) }),
});
export type BrokerRequest = Infer<typeof BrokerRequestSchema>;

/** A PTY channel's one control message (client → broker, as a Json frame). */
export const WindowMessageSchema = object({ type: literal("window"), rows: isPositiveInt, cols: isPositiveInt });
export type WindowMessage = Infer<typeof WindowMessageSchema>;

export const BrokerHelloSchema = object({ v: isString, pid: isInteger });
export type BrokerHello = Infer<typeof BrokerHelloSchema>;

/** What `ping` answers (tests and the benchmark read it). */
export const BrokerStatsSchema = object({
  pid: isInteger,
  connections: isInteger,
  handshakes: isInteger,
  /** Client conversations (daemon streams) and PTY channels in use. */
  liveChannels: isInteger,
  /** Open mux channels to the host daemon (normally 1 once used). */
  muxChannels: isInteger,
  /** Open SSH session channels (PTYs, a relay, daemon-up or an install in progress). */
  sessionChannels: isInteger,
  /** How the daemon is reached: "stream-local", "relay", or null before the first operation. */
  daemonTransport: nullable(isString),
  /** Keys the host daemon's notices hold state for (they keep the broker up). */
  notices: optional(isInteger),
  /** Whether the notices stream is open and its snapshot read. */
  noticesUp: optional(isBoolean),
});
export type BrokerStats = Infer<typeof BrokerStatsSchema>;

export const BrokerResultSchema = oneOf(
  object({ ok: literal(true), stats: optional(BrokerStatsSchema), notices: optional(arrayOf(isRecord)) }),
  object({ ok: literal(false), ...WIRE_ERROR_FIELDS }),
);
export type BrokerResult = Infer<typeof BrokerResultSchema>;

/**
 * How long an operation may wait in the broker for a free session or a reconnect before failing
 * (here, not in process/channel-pool.ts, so clients can bound their wait without loading ssh2).
 */
export const ACQUIRE_WAIT_MS = 30_000;

/** How long the broker keeps retrying after its connection dropped: a few connect timeouts. */
export function reconnectWindowMs(connectTimeoutMs: number): number {
  return Math.max(5000, 3 * connectTimeoutMs);
}

export class BrokerLineError extends RuntimeError {
  constructor(
    readonly reason: LineFailure,
    message: string,
  ) {
    super("network", message);
  }
}

/** Lines are short; anything longer is not our peer. */
const MAX_LINE = 64 * 1024;

export function lineOf(value: unknown): string {
  return `${JSON.stringify(value)}\n`;
}

export function writeLine(sock: Socket, value: unknown): void {
  sock.write(lineOf(value));
}

/**
 * Reads one JSON line from `sock` within `timeoutMs` and checks it against `schema`; bytes after
 * the newline are unshifted back so the raw stream that follows starts exactly after it.
 */
export function readLine<T>(sock: Socket, schema: Guard<T>, timeoutMs: number, what: string): Promise<T> {
  return readJsonLine(sock, schema, { maxLine: MAX_LINE, timeoutMs, unshiftRest: true }).catch((err: unknown) => {
    if (!(err instanceof LineReadError)) throw err;
    const messages: Record<LineFailure, string> = {
      timeout: `broker did not send its ${what} within ${timeoutMs} ms`,
      closed: `broker closed the connection before its ${what}`,
      failed: `broker connection failed before its ${what}: ${err.detail ?? "error"}`,
      "too-long": `broker ${what} is too long`,
      "not-json": `broker ${what} is not JSON`,
      malformed: `broker ${what} is malformed`,
    };
    throw new BrokerLineError(err.reason, messages[err.reason]);
  });
}
