// Builds the three artefacts that run without TypeScript tooling:
//   dist/paseo-workspace-helper.cjs  the workspace helper (node >= 18, built-ins only)
//   dist/remote-agent.cjs            the agent uploaded to hosts, with the helper embedded
//   dist/cli.js                      the runtime executable Paseo spawns (ESM; deps but zod external;
//                                    one lazily imported chunk per operation in dist/cli-chunks/)
// Bundling keeps process start fast: `signal` has a 750 ms budget that includes node start-up.
import { build } from "esbuild";
import { readFileSync, mkdirSync, chmodSync } from "node:fs";
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { terminalSources } from "./terminal-sources.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = (p) => join(root, "dist", p);
mkdirSync(join(root, "dist"), { recursive: true });

const remoteTarget = { platform: "node", target: "node18", format: "cjs", bundle: true, legalComments: "none" };

await build({ ...remoteTarget, entryPoints: [join(root, "helper/src/main.ts")], outfile: out("paseo-workspace-helper.cjs") });
chmodSync(out("paseo-workspace-helper.cjs"), 0o755);
const helperSource = readFileSync(out("paseo-workspace-helper.cjs"), "utf8");

await build({
  ...remoteTarget,
  entryPoints: [join(root, "src/remote-agent/main.ts")],
  outfile: out("remote-agent.cjs"),
  define: { __HELPER_SOURCE__: JSON.stringify(helperSource), ...terminalSources(root) },
});
const agentSource = readFileSync(out("remote-agent.cjs"));
const agentHash = createHash("sha256").update(agentSource).digest("hex").slice(0, 16);

await build({
  platform: "node",
  target: "node20",
  format: "esm",
  bundle: true,
  // zod is bundled: one parsed file instead of zod's many small modules (~40 ms of start-up).
  external: Object.keys(JSON.parse(readFileSync(join(root, "package.json"), "utf8")).dependencies).filter((d) => d !== "zod"),
  // Splitting keeps each operation in its own chunk: external imports (ssh2, …) would otherwise be
  // hoisted to the top of one file and load for every operation, `describe` included. Old chunks
  // are left in place: a process started by a concurrent build still finds the ones it names.
  splitting: true,
  entryPoints: { cli: join(root, "src/cli/main.ts"), broker: join(root, "src/broker/main.ts") },
  outdir: out(""),
  chunkNames: "cli-chunks/[name]-[hash]",
  banner: { js: "#!/usr/bin/env node" },
  define: { __AGENT_HASH__: JSON.stringify(agentHash) },
  legalComments: "none",
});
chmodSync(out("cli.js"), 0o755);
