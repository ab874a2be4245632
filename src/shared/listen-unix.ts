// Starts a net.Server on a Unix socket path and settles once it listens or fails (EADDRINUSE is
// how a second broker, or a stale PTY token, finds out). Built-ins only: the agent bundles it too.
import type { Server } from "node:net";

export function listenUnix(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => {
      server.off("error", reject);
      resolve();
    });
  });
}
