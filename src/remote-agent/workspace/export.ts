// Sends a workspace's commits back to the Paseo host (merge-to-base): a thin pack of the
// checkout's HEAD minus the commits the runtime says it has, streamed as Stdout data frames and an
// Eof frame before the op's result. Only committed work travels; the checkout is not modified.
import { FrameKind, encodeData, encodeFrame } from "../../shared/frames.js";
import { git, gitStream, knownCommits, SHA_RE } from "../../shared/git-exec.js";
import { RuntimeError } from "../../shared/errors.js";
import type { AgentContext } from "../context.js";

const EXPORT_TIMEOUT_MS = 600_000;

export async function checkoutHead(checkout: string): Promise<string> {
  const head = (await git(["rev-parse", "--verify", "HEAD^{commit}"], { cwd: checkout })).trim();
  if (!SHA_RE.test(head)) throw new RuntimeError("remote", "workspace checkout has no HEAD commit");
  return head;
}

/**
 * Streams the objects of `wants` (default: HEAD) that `offered` do not reach. Every want must be a
 * commit of the checkout: the runtime asks only for what the work state named.
 */
export async function streamPack(
  ctx: AgentContext,
  checkout: string,
  offered: string[],
  wants?: string[],
): Promise<{ head: string; bytes: number }> {
  const head = await checkoutHead(checkout);
  const tips = wants && wants.length > 0 ? wants : [head];
  if (wants && wants.length > 0) {
    const known = await knownCommits(checkout, wants);
    const unknown = wants.filter((w) => !known.includes(w));
    if (unknown.length > 0) throw new RuntimeError("remote", `workspace checkout has no commit ${unknown[0]}`);
  }
  const haves = await knownCommits(checkout, offered);
  const pack = gitStream(["pack-objects", "--revs", "--thin", "--stdout", "--delta-base-offset", "--quiet"], {
    cwd: checkout,
    timeoutMs: EXPORT_TIMEOUT_MS,
  });
  pack.stdin.end([...tips, ...haves.map((h) => `^${h}`)].join("\n") + "\n");
  let bytes = 0;
  for await (const chunk of pack.stdout as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    for (const f of encodeData(FrameKind.Stdout, chunk)) ctx.sendRaw(f);
  }
  await pack.done;
  ctx.sendRaw(encodeFrame(FrameKind.Eof, Buffer.from([1])));
  return { head, bytes };
}
