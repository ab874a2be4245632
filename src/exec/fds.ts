// The wrapper's extra descriptors (docs/contract.md#exec-fds): fd3 carries Paseo's control frames in, fd4 our
// process events out. Paseo passes socket pairs or pipes; both work as net.Socket (non-blocking).
// A regular file (hand-run tests) falls back to fs streams.
import { createReadStream, createWriteStream, fstatSync } from "node:fs";
import { Socket } from "node:net";
import type { Readable, Writable } from "node:stream";
import { RuntimeError } from "../shared/errors.js";

function checkFd(fd: number, role: string): boolean {
  try {
    const st = fstatSync(fd);
    return st.isFIFO() || st.isSocket();
  } catch {
    throw new RuntimeError("input", `exec needs fd${fd} (${role}) open; Paseo starts exec with five pipes`);
  }
}

export function openControlIn(fd = 3): Readable {
  return checkFd(fd, "control frames") ? new Socket({ fd, readable: true, writable: false }) : createReadStream("", { fd });
}

export function openEventsOut(fd = 4): Writable {
  const out = checkFd(fd, "process events") ? new Socket({ fd, readable: false, writable: true }) : createWriteStream("", { fd });
  // Paseo may destroy its end on failure; a failed event write must not crash the wrapper.
  out.on("error", () => undefined);
  return out;
}

/** Resolves once everything written so far has been handed to the OS. */
export function flushed(stream: Writable): Promise<void> {
  return new Promise((resolve) => {
    if (stream.destroyed || stream.writableEnded) return resolve();
    stream.write("", () => resolve());
  });
}

/** Ends a stream and resolves when it has finished (or failed: nothing more can be done then). */
export function endStream(stream: Writable): Promise<void> {
  return new Promise((resolve) => {
    if (stream.destroyed || stream.writableFinished) return resolve();
    stream.once("error", () => resolve());
    stream.end(() => resolve());
  });
}
