// Builds the three artefacts that run without TypeScript tooling:
//   dist/paseo-workspace-helper.cjs  the workspace helper (node >= 18, built-ins only)
//   dist/remote-agent.cjs            the agent uploaded to hosts, with the helper embedded
//   dist/cli.js                      the runtime executable Paseo spawns (ESM, deps external)
// Bundling keeps process start fast: `signal` has a 750 ms budget that includes node start-up.
import { build } from "esbuild";
import { readFileSync, mkdirSync, chmodSync } from "node:fs";
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

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
  define: { __HELPER_SOURCE__: JSON.stringify(helperSource) },
});
const agentSource = readFileSync(out("remote-agent.cjs"));
const agentHash = createHash("sha256").update(agentSource).digest("hex").slice(0, 16);

await build({
  platform: "node",
  target: "node20",
  format: "esm",
  bundle: true,
  packages: "external",
  entryPoints: [join(root, "src/cli/main.ts")],
  outfile: out("cli.js"),
  banner: { js: "#!/usr/bin/env node" },
  define: { __AGENT_HASH__: JSON.stringify(agentHash) },
  legalComments: "none",
});
chmodSync(out("cli.js"), 0o755);
