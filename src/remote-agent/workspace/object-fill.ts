// Brings one commit's objects from the runtime into a project's cache on the host (submodules:
// submodule-checkout.ts): asks only when the cache lacks the commit, or holds it with less history than
// the source (a shallow boundary the source is no longer cut at), and receives a thin pack of what
// the cache lacks. The source's own boundary is then recorded, so the checkout can keep it.
import { RuntimeError } from "../../shared/errors.js";
import type { AgentContext } from "../context.js";
import { rootLayout } from "../layout.js";
import { cacheTips, hasCommit } from "./git-cache.js";
import { receivePack } from "./pack-intake.js";
import { diskInfo } from "./disk.js";
import { cacheBoundary, reachedBoundary, recordShallow } from "./cache-shallow.js";
import type { FrameInbox } from "./frame-inbox.js";

/** A create's exchange with the runtime while objects come in: whom to ask, where the streams arrive, and when the create started (each ask reports the time spent). */
export interface Intake {
  ctx: AgentContext;
  inbox: FrameInbox;
  startedAt: number;
}

export interface ObjectsWanted {
  commit: string;
  /** The source repository's shallow boundary. */
  shallow: string[];
  /** Other commits the cache must hold (the branch's upstream remote-tracking commit). */
  tips?: string[];
}

export async function fillObjects({ ctx, inbox, startedAt }: Intake, cache: string, wanted: ObjectsWanted): Promise<void> {
  const { commit, shallow, tips = [] } = wanted;
  const held = await hasCommit(cache, commit);
  let tipsHeld = true;
  for (const tip of tips) if (tipsHeld && !(await hasCommit(cache, tip))) tipsHeld = false;
  const cut = held ? await reachedBoundary(cache, commit, rootLayout(ctx.root).tmpBase) : await cacheBoundary(cache);
  if (!held || !tipsHeld || cut.some((c) => !shallow.includes(c))) {
    // The free space lets the runtime refuse a transfer that cannot fit before sending anything.
    const haves = await cacheTips(cache);
    ctx.sendJson({
      type: "need-objects",
      haves,
      ...(cut.length > 0 ? { shallow: cut } : {}),
      disk: diskInfo(ctx.root),
      agentMs: Date.now() - startedAt,
    });
    await receivePack(ctx.root, cache, inbox);
    if (!(await hasCommit(cache, commit))) throw new RuntimeError("remote", `objects for commit ${commit} did not arrive`);
  }
  recordShallow(cache, shallow);
}
