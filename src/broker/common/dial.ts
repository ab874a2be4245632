// Connecting to a broker socket and reading its hello, shared by clients (BrokerHost) and by a
// starting broker probing whether the socket it wants is held by a live broker of its version.
import { connect, type Socket } from "node:net";
import { BrokerHelloSchema, readLine, type BrokerHello } from "./wire.js";

export type DialResult =
  | { state: "ok"; sock: Socket; hello: BrokerHello }
  /** Nothing listens (no file, or a dead broker's file). */
  | { state: "absent"; code: string }
  /** Something listens but is not a broker of our version (old build, hung, not a broker). */
  | { state: "mismatch"; detail: string };

/** How long a live broker may take to say hello before it counts as broken. */
export const HELLO_TIMEOUT_MS = 2000;

/**
 * `version` null accepts a broker of any build (to stop it, for instance). `early` is written as
 * soon as the socket connects, before the hello is read: a client's request line then costs no
 * round trip of its own. The socket is ours (broker-paths.ts), and one whose hello does not match is
 * destroyed, so a request sent early to it opens nothing that outlives it.
 */
export function dial(path: string, version: string | null, timeoutMs = HELLO_TIMEOUT_MS, early?: string): Promise<DialResult> {
  return new Promise((resolve) => {
    const sock = connect({ path, allowHalfOpen: true });
    const onError = (err: NodeJS.ErrnoException) => {
      sock.destroy();
      resolve({ state: "absent", code: err.code ?? err.message });
    };
    sock.once("error", onError);
    sock.once("connect", () => {
      sock.off("error", onError);
      if (early !== undefined) sock.write(early);
      readLine(sock, BrokerHelloSchema, timeoutMs, "hello").then(
        (hello) => {
          if (version === null || hello.v === version) return resolve({ state: "ok", sock, hello });
          sock.destroy();
          resolve({ state: "mismatch", detail: `version ${hello.v}, expected ${version}` });
        },
        (err: Error) => {
          sock.destroy();
          resolve({ state: "mismatch", detail: err.message });
        },
      );
    });
  });
}
