// A child-process driver for terminal tests: bundled by bundle.ts and run with node as root or as
// the rig's non-root user (runuser), so the driver can also be killed from outside. Usage:
//   node harness.cjs <probe|a21|hold|echo> '<json>'   → one JSON line on stdout (hold: then waits)
import { closeSync, openSync } from "node:fs";
import { probeTerminalSupport, spawnTerminal, type ProbeOptions } from "../../src/remote-agent/terminal/host-terminals.js";
import { collect, echoThrough, runA21, spec } from "./scenarios.js";

interface Args extends ProbeOptions {
  agentDir: string;
  cwd?: string;
  tagPath?: string;
  script?: string;
  total?: number;
}

const print = (v: unknown): void => void process.stdout.write(JSON.stringify(v) + "\n");

async function main(): Promise<void> {
  const [command, json] = process.argv.slice(2);
  const args = JSON.parse(json ?? "{}") as Args;
  const support = await probeTerminalSupport(args.agentDir, args);
  if (command === "probe") return print(support);
  if (support.method === "none") throw new Error(support.reason);
  if (command === "a21") return print(await runA21(support, args.cwd!));
  if (command === "echo") return print(await echoThrough(support, args.total!));
  if (command === "hold") {
    // Starts `sh -c <script>` with the tag, reports who is who once it printed "started", then
    // stays until killed: what happens after is the relay's business.
    const tagFd = openSync(args.tagPath!, "w", 0o600);
    const t = await spawnTerminal(support, spec("/bin/sh", ["-c", args.script!], { env: { PATH: "/usr/bin:/bin" }, tagFd }));
    closeSync(tagFd);
    await collect(t).wait("started");
    print({ driver: process.pid, relay: t.relayPid, pid: t.pid, sid: t.sid });
    setInterval(() => undefined, 60_000);
    return;
  }
  throw new Error(`unknown command ${command}`);
}

main().catch((err: Error) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
