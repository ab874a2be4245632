// Asks whatever listens on a daemon socket (relative to run/) for its HELLO: a live daemon answers
// at once; no answer within the bound means none is there (no file, a stale file, or a hung one).
import { connect } from "node:net";
import { Mux, type MuxHello } from "../../shared/mux.js";

export const PROBE_TIMEOUT_MS = 3000;

export function probeDaemon(socket: string, build: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<MuxHello | null> {
  return new Promise((resolve) => {
    const sock = connect(socket);
    const timer = setTimeout(() => done(null), timeoutMs);
    const done = (hello: MuxHello | null) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(hello);
    };
    sock.once("error", () => done(null));
    sock.once("connect", () => {
      const mux = new Mux(sock, { role: "client", build });
      mux.hello().then(
        (h) => done(h.role === "server" ? h : null),
        () => done(null),
      );
    });
  });
}
