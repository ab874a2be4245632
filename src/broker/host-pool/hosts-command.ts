// `hostsCommand`: an argv run on the Paseo host (no shell unless the user names one) that prints the
// pool's host entries as a JSON array: the bridge to a fleet engine (kubectl, aws, nomad). Bounded in
// time and output; its answer is cached briefly in the private broker directory. A failing or
// malformed answer is an error, never an empty pool.
import { spawn } from "node:child_process";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import { sha256Hex } from "../../shared/sha256.js";
import type { HostsCommand } from "./options.js";
import { cachedHostList, cacheHostList } from "./state.js";

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

function runBounded(cmd: HostsCommand): Promise<string> {
  const [file, ...args] = cmd.argv;
  return new Promise((resolve, reject) => {
    const child = spawn(file!, args, { stdio: ["ignore", "pipe", "pipe"], shell: false });
    const out: Buffer[] = [];
    let size = 0;
    let stderr = "";
    let failure: RuntimeError | null = null;
    const stop = (err: RuntimeError) => {
      failure ??= err;
      child.kill("SIGKILL");
    };
    const timer = setTimeout(
      () => stop(new RuntimeError("input", `hostsCommand ${file} did not finish within ${cmd.timeoutMs} ms`)),
      cmd.timeoutMs,
    );
    child.stdout.on("data", (b: Buffer) => {
      size += b.length;
      if (size > MAX_OUTPUT_BYTES) stop(new RuntimeError("input", `hostsCommand ${file} printed more than ${MAX_OUTPUT_BYTES} bytes`));
      else out.push(b);
    });
    child.stderr.on("data", (b: Buffer) => {
      if (stderr.length < 4096) stderr += b.toString("utf8");
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(new RuntimeError("input", `hostsCommand ${file} could not be started: ${oneLine(err.message)}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (failure) return reject(failure);
      if (code !== 0) {
        const said = stderr.trim() ? `: ${oneLine(stderr.trim())}` : "";
        return reject(new RuntimeError("input", `hostsCommand ${file} failed (${signal ?? `exit ${code}`})${said}`));
      }
      resolve(Buffer.concat(out).toString("utf8"));
    });
  });
}
