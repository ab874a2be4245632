// Host facts and liveness checks (used by `doctor` and by the transport's version check).
import { execFileSync } from "node:child_process";
import { statfsSync, mkdirSync } from "node:fs";
import { arch, platform, release } from "node:os";
import type { OneShotHandlers } from "./context.js";
import type { HostFacts } from "../shared/agent-api.js";
import { terminalSupport } from "./exec/pty.js";
import { gitLfsVersion } from "./workspace/lfs-checkout.js";
import { hostGitSearchPath } from "./test-hooks.js";

function gitVersion(): string | null {
  try {
    return execFileSync("git", ["--version"], { encoding: "utf8", timeout: 5000 }).trim();
  } catch {
    return null;
  }
}

async function terminalFacts(agentDir: string): Promise<HostFacts["terminal"]> {
  const s = await terminalSupport(agentDir);
  if (s.method === "python3") return { method: s.method, detail: `python ${s.version} (${s.python})` };
  if (s.method === "script") return { method: s.method, detail: `${s.script} with ${s.stty}` };
  return { method: "none", detail: s.reason };
}

export const systemOps: Pick<OneShotHandlers, "ping" | "facts"> = {
  ping: async () => ({ pong: true }),
  facts: async (ctx) => {
    mkdirSync(ctx.root, { recursive: true, mode: 0o700 });
    let freeBytes: number | null = null;
    try {
      const s = statfsSync(ctx.root);
      freeBytes = Number(s.bavail) * Number(s.bsize);
    } catch {
      freeBytes = null;
    }
    return {
      os: `${platform()} ${release()}`,
      arch: arch(),
      node: process.version,
      nodePath: ctx.nodePath,
      git: gitVersion(),
      gitLfs: await gitLfsVersion(hostGitSearchPath(ctx.root) ?? process.env.PATH ?? ""),
      root: ctx.root,
      freeBytes,
      terminal: await terminalFacts(ctx.agentDir),
    };
  },
};
