// Optional progress lines for create (env PASEO_SSH_PROGRESS=1): one JSON object per line on
// stderr with the phase and the milliseconds since the operation started. stdout never carries
// anything but the response. Tests use the objects-sent byte counts to prove incremental transfer.
import type { Writable } from "node:stream";

export interface Progress {
  mark(phase: string, extra?: Record<string, number | string>): void;
}

export function createProgress(stderr: Writable, env: NodeJS.ProcessEnv = process.env): Progress {
  const enabled = env.PASEO_SSH_PROGRESS === "1";
  const start = Date.now();
  return {
    mark(phase, extra = {}) {
      if (enabled) stderr.write(JSON.stringify({ phase, ...extra, ms: Date.now() - start }) + "\n");
    },
  };
}
