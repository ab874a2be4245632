// `hostsCommand`: an argv run on the Paseo host (no shell unless the user names one) that prints the
// pool's host entries as a JSON array: the bridge to a fleet engine (kubectl, aws, nomad). Bounded in
// time and output; its answer is cached briefly in the private broker directory. A failing or
// malformed answer is an error, never an empty pool.
import { spawnGroup } from "../../shared/child-group.js";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import { sha256Hex } from "../../shared/sha256.js";
import type { HostsCommand } from "./pool-options.js";
import { cachedHostList, cacheHostList } from "./pool-state.js";

const MAX_OUTPUT_BYTES = 1024 * 1024;

export async function loadHostList(cmd: HostsCommand): Promise<unknown[]> {
  const key = sha256Hex(JSON.stringify(cmd.argv)).slice(0, 24);
  const cached = cmd.cacheMs > 0 ? cachedHostList(key, cmd.cacheMs) : null;
  if (cached) return cached;
  const hosts = parseHostList(await runBounded(cmd), cmd.argv[0]!);
  if (cmd.cacheMs > 0) cacheHostList(key, hosts);
  return hosts;
}

function parseHostList(stdout: string, name: string): unknown[] {
  let value: unknown;
  try {
    value = JSON.parse(stdout) as unknown;
  } catch (err) {
    throw new RuntimeError("input", `hostsCommand ${name} printed no JSON: ${oneLine((err as Error).message)}`);
  }
  // `{"hosts": [...]}` too, so a jq filter may wrap its array.
  const list = Array.isArray(value) ? value : (value as { hosts?: unknown } | null)?.hosts;
  if (!Array.isArray(list)) throw new RuntimeError("input", `hostsCommand ${name} printed JSON that is not an array of host entries`);
  if (list.length === 0) throw new RuntimeError("input", `hostsCommand ${name} listed no host: refusing an empty pool`);
  return list;
}

/**
 * Runs the command leading its own process group: the README's examples are pipelines
 * (`sh -c "kubectl … | jq …"`), and killing only the shell at the time or output bound would leave
 * the rest running and holding stdout (`yes | cat` never ended and spun a CPU).
 */
async function runBounded(cmd: HostsCommand): Promise<string> {
  const [file, ...args] = cmd.argv;
  const g = spawnGroup(file!, args, { stdin: "ignore", timeoutMs: cmd.timeoutMs });
  const out: Buffer[] = [];
  let size = 0;
  let stderr = "";
  let overflow = false;
  g.child.stdout.on("data", (b: Buffer) => {
    size += b.length;
    if (size <= MAX_OUTPUT_BYTES) return void out.push(b);
    overflow = true;
    g.child.stdout.destroy();
    g.kill();
  });
  g.child.stderr.on("data", (b: Buffer) => {
    if (stderr.length < 4096) stderr += b.toString("utf8");
  });
  const end = await g.ended.catch((err: Error) => {
    throw new RuntimeError("input", `hostsCommand ${file} could not be started: ${oneLine(err.message)}`);
  });
  if (end.timedOut) throw new RuntimeError("input", `hostsCommand ${file} did not finish within ${cmd.timeoutMs} ms`);
  if (overflow) throw new RuntimeError("input", `hostsCommand ${file} printed more than ${MAX_OUTPUT_BYTES} bytes`);
  if (end.code !== 0) {
    const said = stderr.trim() ? `: ${oneLine(stderr.trim())}` : "";
    throw new RuntimeError("input", `hostsCommand ${file} failed (${end.signal ?? `exit ${end.code}`})${said}`);
  }
  return Buffer.concat(out).toString("utf8");
}
