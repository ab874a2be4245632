// `create` on a pool (`hosts` / `hostsCommand`): a workspace created before (Paseo retrying) stays on
// its host; otherwise every candidate host is asked for its live load and the best one takes it
// (src/workspace/pool/pool.ts). The chosen host is named in progress and recorded once the
// workspace exists, so every later operation goes straight there.
import type { LifecycleRequest } from "../contract/schemas.js";
import { withHost } from "../broker/client/open-host.js";
import { loadPool, placeWorkspace, recordPlacement } from "./pool/pool.js";
import { readPlacement } from "./pool/pool-state.js";
import { onPoolHost } from "./pool/detect.js";
import { recordedHost } from "./pool/locate.js";
import { checkoutFootprint } from "../shared/disk-space.js";
import type { CreateResult } from "../shared/agent-api.js";
import { prepareCreate, runCreate } from "./create-workspace.js";
import type { Progress } from "./progress.js";

export async function createInPool(request: LifecycleRequest, raw: Record<string, unknown>, progress: Progress): Promise<CreateResult> {
  const owner = request.runtimeInstanceId;
  const input = request.input!;
  const pool = await loadPool(raw);
  const prepared = await prepareCreate(input, owner);
  prepared.request.scope = pool.scope;
  const earlier = readPlacement(owner, input.workspaceId);
  if (earlier) {
    const host = recordedHost(raw, earlier);
    progress.mark("placed", { host: host.label });
    return onPoolHost(host.label, () => withHost(host.options, (h) => runCreate(h, prepared, progress, host.options), { failFast: true }));
  }
  const source = prepared.request.source;
  const projectKey = source.kind === "directory" ? source.projectKey : null;
  // The existing disk estimate (what the checkout writes), per block size the hosts report.
  const footprints = new Map<number, Promise<number>>();
  const needBytes = (blockSize: number): Promise<number> => {
    if (source.kind !== "directory" || !prepared.repo) return Promise.resolve(0);
    let need = footprints.get(blockSize);
    if (!need) {
      need = checkoutFootprint(prepared.repo, source.commit, blockSize).then((f) => f.bytes);
      footprints.set(blockSize, need);
    }
    return need;
  };
  // Started while the hosts are asked, for the block size nearly every filesystem reports, so the
  // estimate is not a step of its own after their facts arrive.
  needBytes(4096).catch(() => undefined);
  // No record here: the hosts are asked in the same round trip whether one already holds it.
  const lookFor = { workspaceId: input.workspaceId, owner };
  const placement = await placeWorkspace(pool, projectKey, (load) => needBytes(load.blockSize), lookFor);
  try {
    // Found there (no score: nothing was placed), as when the record leads back to it.
    const fields: Record<string, string | number> = { host: placement.entry.label };
    if (!placement.existing) fields.score = Math.round(placement.score * 100) / 100;
    progress.mark("placed", fields);
    const result = await onPoolHost(placement.entry.label, () =>
      withHost(placement.entry.options, (host) => runCreate(host, prepared, progress, placement.entry.options), {
        failFast: true,
      }),
    );
    recordPlacement(owner, placement.entry, input.workspaceId, pool.scope);
    return result;
  } finally {
    placement.release();
  }
}
