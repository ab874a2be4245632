// Where a blob counts as big (src/workspace/big-objects.ts says why): both sides of a create make
// their git processes stream such blobs instead of holding them in memory.
/** 32 MiB: small enough that memory stays bounded, large enough that source files keep deltas. */
export const BIG_BLOB_BYTES = 32 * 1024 * 1024;

/** The git config that makes a git process stream blobs over BIG_BLOB_BYTES. */
export const STREAM_BIG_BLOBS: Record<string, string> = { "core.bigFileThreshold": String(BIG_BLOB_BYTES) };

/** `GIT_CONFIG_*` variables that set `config` for one git child (not in its argv, not in a file). */
export function configEnv(config: Record<string, string>): Record<string, string> {
  const entries = Object.entries(config);
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(entries.length) };
  entries.forEach(([k, v], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = k;
    env[`GIT_CONFIG_VALUE_${i}`] = v;
  });
  return env;
}
