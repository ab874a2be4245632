// OpenSSH's own evaluation of ssh_config: `ssh -G [-F file] [-o User=…] [-o Port=…] -- alias`
// prints the effective configuration without connecting. Used whenever the `ssh` binary exists,
// so Host/Match (exec included: ssh runs it only where it would when connecting), Include,
// canonicalisation and defaults are exactly what `ssh alias` would use.
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import { parseDump, type Dump } from "./dump.js";

/** The system-wide config ssh reads after the user's (unless given -F). */
export const SYSTEM_CONFIG = "/etc/ssh/ssh_config";

/** `Match exec` may run commands; none may hold an operation longer than this. */
export const SSH_G_TIMEOUT_MS = 10_000;

/** The ssh binary on PATH, or null (then the fallback evaluator is used). */
export function findSsh(path = process.env.PATH ?? ""): string | null {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, "ssh");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return null;
}

export interface EvalRequest {
  /** A config file (ssh -F), or null for ssh's own defaults (~/.ssh/config and the system file). */
  file: string | null;
  alias: string;
  /** Values given explicitly, which win over the config as `ssh -o` does. */
  user?: string;
  port?: number;
  /** A ProxyJump that overrides the host's own (`ssh -J`), for a hop reached through others. */
  proxyJump?: string;
}

export function sshGArgs(req: EvalRequest): string[] {
  return [
    "-G",
    ...(req.file !== null ? ["-F", req.file] : []),
    ...(req.user !== undefined ? ["-o", `User=${req.user}`] : []),
    ...(req.port !== undefined ? ["-o", `Port=${req.port}`] : []),
    ...(req.proxyJump !== undefined ? ["-o", `ProxyJump=${req.proxyJump}`] : []),
    "--",
    req.alias,
  ];
}

export async function runSshG(ssh: string, req: EvalRequest, timeoutMs = SSH_G_TIMEOUT_MS): Promise<Dump> {
  // Loaded only here: most operations find the answer cached (ssh-g-cache.ts), and node:child_process
  // is a measurable part of a runtime process's start-up.
  const { execFile } = await import("node:child_process");
  return new Promise((resolve, reject) => {
    execFile(
      ssh,
      sshGArgs(req),
      { timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 4 * 1024 * 1024, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (!err) return resolve(parseDump(stdout));
        const where = req.file ?? "ssh_config";
        if ((err as { killed?: boolean }).killed) {
          return reject(
            new RuntimeError("input", `ssh -G for ${req.alias} (${where}) did not finish within ${timeoutMs} ms (a Match exec command?)`),
          );
        }
        // ssh reports config errors as "<file> line <n>: <problem>" lines; the first one says it.
        const why = oneLine(stderr.split("\n").find((l) => l.trim() !== "" && !/Pseudo-terminal/.test(l)) ?? err.message);
        reject(new RuntimeError("input", `ssh_config for ${req.alias} cannot be used: ${why}`));
      },
    );
  });
}
