// The two ways a hop's SSH stream is carried when it is not a plain TCP connection: a ProxyCommand
// (`$SHELL -c "exec <command>"`, its stdin/stdout as the socket, its stderr kept for the error
// line, killed when the connection ends) and a ProxyJump hop (`direct-tcpip` forwarded through the
// previous hop's SSH connection, with a clear line when the jump host refuses to forward).
import { spawn } from "node:child_process";
import { Duplex } from "node:stream";
import type { Client } from "ssh2";
import { RuntimeError, oneLine } from "../shared/errors.js";

export interface ProxyProcess {
  stream: Duplex;
  /** The command's last stderr output, one line (for error messages). */
  stderr(): string;
  /** Exit status once it exited (null while running). */
  exitStatus(): string | null;
  /** Resolves once the command has exited and its output is read (bounded by the caller). */
  exited: Promise<void>;
  kill(): void;
}

/**
 * Starts a ProxyCommand as OpenSSH does: through the user's shell, with `exec`, in the user's
 * environment (`env`: the broker passes the one of the operation that started it).
 */
export function startProxyCommand(command: string, env: NodeJS.ProcessEnv = process.env): ProxyProcess {
  const shell = env.SHELL || "/bin/sh";
  const child = spawn(shell, ["-c", `exec ${command}`], { stdio: ["pipe", "pipe", "pipe"], env });
  let err = "";
  let status: string | null = null;
  child.stderr.on("data", (d: Buffer) => (err = (err + d.toString("utf8")).slice(-2000)));
  child.on("error", (e) => (err = `${err}\n${e.message}`));
  child.on("exit", (code, signal) => (status = signal ? `killed by ${signal}` : `exit ${String(code)}`));
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  const stream = Duplex.from({ readable: child.stdout, writable: child.stdin });
  // The connection ends when the command does, even if one of its pipes is still open.
  child.once("close", () => stream.destroy());
  stream.on("error", () => undefined);
  stream.once("close", () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  });
  return {
    stream,
    stderr: () => oneLine(err).slice(-300),
    exitStatus: () => status,
    exited,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      stream.destroy();
    },
  };
}

/** Opens a `direct-tcpip` channel to host:port through `via` (the jump host's connection). */
export function forwardThrough(via: Client, viaName: string, host: string, port: number, timeoutMs: number): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      reject(
        new RuntimeError("network", `Jump host ${viaName} did not open a forwarding channel to ${host}:${port} within ${timeoutMs} ms`),
      );
    }, timeoutMs);
    via.forwardOut("127.0.0.1", 0, host, port, (err, channel) => {
      clearTimeout(timer);
      if (settled) {
        if (!err) channel.destroy();
        return;
      }
      settled = true;
      if (!err) return resolve(channel);
      const reason = oneLine(err.message);
      const prohibited = /prohibited/i.test(reason) || (err as { reason?: number }).reason === 1;
      reject(
        new RuntimeError(
          "network",
          prohibited
            ? `Jump host ${viaName} refused to forward to ${host}:${port} (${reason}): its sshd has TCP forwarding disabled (AllowTcpForwarding no); allow it for this user or use another jump host`
            : `Jump host ${viaName} could not connect to ${host}:${port}: ${reason}`,
        ),
      );
    });
  });
}
