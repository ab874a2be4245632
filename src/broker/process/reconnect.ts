// Re-establishing the broker's SSH connection after the link dropped: retries with backoff and
// jitter (brokers of many hosts, or many brokers of one, do not retry in lockstep) within the
// reconnect window, except for failures retrying cannot fix (a wrong key or host key), and
// one clear line naming the host and the window when it gives up.
import pRetry, { AbortError } from "p-retry";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import type { RuntimeOptions } from "../../transport/options.js";
import { reconnectWindowMs } from "../common/wire.js";

export async function reconnect<T>(
  connectOnce: () => Promise<T>,
  options: RuntimeOptions,
  pool: { closed(): boolean; log(line: string): void },
): Promise<T> {
  const window = reconnectWindowMs(options.connectTimeoutMs);
  try {
    return await pRetry(
      async () => {
        if (pool.closed()) throw new AbortError("broker is shutting down");
        try {
          return await connectOnce();
        } catch (err) {
          // Wrong key or host key: retrying cannot help.
          if (err instanceof RuntimeError && err.errorClass !== "network") throw new AbortError(err);
          throw err;
        }
      },
      {
        retries: 20,
        minTimeout: 100,
        maxTimeout: 2000,
        randomize: true,
        maxRetryTime: window,
        onFailedAttempt: ({ error, attemptNumber }) => pool.log(`reconnect attempt ${attemptNumber} failed: ${oneLine(error.message)}`),
      },
    );
  } catch (err) {
    if (err instanceof RuntimeError && err.errorClass !== "network") throw err;
    const why = oneLine(err instanceof Error ? err.message : String(err));
    throw new RuntimeError(
      "network",
      `SSH connection to ${options.host}:${options.port} dropped and was not re-established within ${window} ms: ${why}`,
    );
  }
}
