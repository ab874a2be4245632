// The receive window of a forwarded TCP channel, kept open the way OpenSSH's client keeps it
// (issue 29: a download through a forwarded port against `ssh -L`).
//
// ssh2 (1.17, lib/Channel.js and lib/client.js) opens every channel with a fixed 2 MiB window and
// adjusts it only once half of it is used up, counting bytes as used when they arrive: the server
// then has 1-2 MiB of credit in flight, and behind a 50 ms round trip a download moved 19 MB/s
// where `ssh -L` moved 33. OpenSSH's client credits bytes once they were written to the local
// socket, a few packets at a time, so nearly all of its 2 MiB are in flight. Here the same: credit
// for what left the broker, in steps of an eighth of the window.
//
// On a link whose round trip (the channel open's, given by the caller) is long enough that the
// window and not the bandwidth limits the download, the window doubles, up to MAX_WINDOW: when the
// bytes that left in one round trip at the current rate are 3/4 of it or more, and nothing waits
// here for the local reader. A short link (GROW_MIN_RTT_MS) keeps ssh2's flow control: 2 MiB are plenty, a larger window only
// made OpenSSH 9.2's sshd slower (its channel buffer then holds up to the whole window: measured
// 50-90 % sshd CPU at a few MB/s with 8 MiB, direct).
//
// Memory: credit is only ever given back for bytes that left the broker (into the local socket's
// kernel buffer), so what waits here for a reader that stopped never exceeds the window it had
// grown to (MAX_WINDOW at most), or ssh2's own 2 MiB (its flow control stays in place underneath).
//
// ssh2 has no option for any of this. What is used of its internals: channel.incoming.{window,state},
// channel.outgoing.{id,state} and channel._client._protocol.channelWindowAdjust(id, bytes), the
// function ssh2's own windowAdjust calls. When any of them is missing or of another type (a
// changed ssh2, or a stream that is not an ssh2 channel) the channel keeps ssh2's flow control.
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";

/** ssh2's window (lib/Channel.js MAX_WINDOW): where every channel starts. */
export const INITIAL_WINDOW = 2 * 1024 * 1024;
/** The most a channel's window grows to. */
export const MAX_WINDOW = 4 * 1024 * 1024;
/**
 * A channel whose open took less than this keeps ssh2's own flow control: on a short link the
 * broker's CPU, not the window, bounds a download (a direct bench moved 0.63-0.74x of ssh -L with
 * the credit below against 0.68-0.81x with ssh2's), and a loaded machine's slow open stays below.
 */
export const GROW_MIN_RTT_MS = 30;
/** Credit is sent back once this fraction of the window is owed (OpenSSH: 3 packets). */
const STEP_DIVISOR = 8;

interface Ssh2ChannelInternals {
  incoming: { window: number; state: string };
  outgoing: { id: number; state: string };
  _client: { _protocol: { channelWindowAdjust(id: number, amount: number): void } };
}

/** The internals this needs, or null when `ch` does not have them as ssh2 1.17 does. */
function internalsOf(ch: Duplex): Ssh2ChannelInternals | null {
  const c = ch as Partial<Ssh2ChannelInternals>;
  const ok =
    typeof c.incoming?.window === "number" &&
    typeof c.incoming.state === "string" &&
    typeof c.outgoing?.id === "number" &&
    typeof c.outgoing.state === "string" &&
    typeof c._client?._protocol?.channelWindowAdjust === "function";
  return ok ? (c as Ssh2ChannelInternals) : null;
}

export interface WindowOptions {
  /** The link's round trip (e.g. how long the channel took to open); none: the window never grows. */
  rttMs?: number;
  initial?: number;
  max?: number;
}

/**
 * Pipes `sock` into `ch` and `ch` into `sock` (ends follow, as `pipe` does) and manages `ch`'s
 * receive window as above on a long link. Returns false when `ch` keeps ssh2's own flow control.
 */
export function pipeChannel(ch: Duplex, sock: Socket, opts: WindowOptions = {}): boolean {
  sock.pipe(ch);
  ch.pipe(sock);
  const c = internalsOf(ch);
  const rttMs = opts.rttMs ?? 0;
  if (!c || rttMs < GROW_MIN_RTT_MS) return false;
  const max = opts.max ?? MAX_WINDOW;
  let target = Math.min(opts.initial ?? INITIAL_WINDOW, max);
  /** Bytes ch handed to sock so far; those not in sock's buffer any more reached the kernel. */
  let delivered = 0;
  /** Where the current rate measurement started: bytes gone, and when. */
  let since = { gone: 0, at: performance.now() };
  const open = () => c.incoming.state === "open" && (c.outgoing.state === "open" || c.outgoing.state === "eof") && !ch.destroyed;
  const topUp = () => {
    if (!open()) return;
    const waiting = ch.readableLength + sock.writableLength;
    const gone = delivered - sock.writableLength;
    if (target < max) {
      const now = performance.now();
      const elapsed = now - since.at;
      if (elapsed >= rttMs) {
        const perRtt = ((gone - since.gone) / elapsed) * rttMs;
        if (perRtt >= target * 0.75 && waiting < target / STEP_DIVISOR) target = Math.min(target * 2, max);
        since = { gone, at: now };
      }
    }
    const owed = target - c.incoming.window - waiting;
    if (owed < target / STEP_DIVISOR) return;
    c.incoming.window += owed;
    c._client._protocol.channelWindowAdjust(c.outgoing.id, owed);
  };
  // After pipe's own "data" listener: the chunk is in sock (or in the kernel) when this runs.
  const onData = (d: Buffer) => {
    delivered += d.length;
    topUp();
  };
  ch.on("data", onData);
  sock.on("drain", topUp);
  const stop = () => {
    ch.off("data", onData);
    sock.off("drain", topUp);
  };
  ch.once("end", stop);
  ch.once("close", stop);
  sock.once("close", stop);
  topUp();
  return true;
}
