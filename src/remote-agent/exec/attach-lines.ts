// Newline-delimited JSON over the local Unix socket between a PTY exec's control agent and its
// pty-attach process. Both ends are our own code on the same host; the socket lives in a 0700
// directory, so the launch message may carry the workload env (never a command line or file).
import type { Socket } from "node:net";

export function sendLine(sock: Socket, msg: unknown): void {
  if (!sock.destroyed) sock.write(JSON.stringify(msg) + "\n");
}

export function onLines(sock: Socket, handle: (msg: Record<string, unknown>) => void): void {
  let buf = "";
  sock.setEncoding("utf8");
  sock.on("data", (chunk: string) => {
    buf += chunk;
    for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line === "") continue;
      let msg: unknown;
      try {
        msg = JSON.parse(line);
      } catch {
        sock.destroy();
        return;
      }
      if (typeof msg === "object" && msg !== null) handle(msg as Record<string, unknown>);
    }
  });
}
