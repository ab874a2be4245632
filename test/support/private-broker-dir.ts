// A test file's own broker directory, and so its own pool state (placement records, down marks,
// reservations: src/workspace/pool/pool-state.ts keeps them under brokerDir()/pool). Test files run in
// parallel workers of one run, which share the run's TMPDIR: without this, a file that lists or counts
// what is in that directory sees the records and broker sockets of the other files.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { stopPrivateBrokers } from "../../src/demo/brokers.js";

/**
 * Call first in a describe: from its beforeAll until its afterAll (which the stacked hooks run last)
 * this worker's TMPDIR is a directory of the file's own, so brokerDir() here and in every runtime
 * process started with the inherited environment is `<it>/paseo-ssh-<uid>` (XDG_RUNTIME_DIR is unset
 * by the rig). The brokers started there are stopped at the end: the rig's teardown only stops
 * those under the run's TMPDIR.
 */
export function usePrivateBrokerDir(label: string): void {
  let saved: string | undefined;
  let own: string | undefined;
  beforeAll(() => {
    saved = process.env.TMPDIR;
    own = mkdtempSync(join(tmpdir(), `paseo-${label}-`));
    process.env.TMPDIR = own;
  });
  afterAll(async () => {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
    if (own === undefined) return;
    await stopPrivateBrokers(own);
    rmSync(own, { recursive: true, force: true });
  }, 30_000);
}
