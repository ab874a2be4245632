// Builds the artefacts that run without TypeScript tooling:
//   dist/paseo-workspace-helper.cjs  the workspace helper (node >= 18, built-ins only)
//   dist/remote-agent.cjs            the agent uploaded to hosts, with the helper embedded
//   dist/cli.js                      the runtime executable Paseo spawns: the dispatcher and
//                                    `describe`, one CommonJS file
//   dist/ops/<op>-<hash>.cjs         every other operation as one CommonJS bundle, which
//                                    src/cli/op-bundle.ts runs with V8's code cache
//   dist/broker.js                   the per-host broker: a stub requiring its content-hashed
//                                    CommonJS bundle (dist/cli-chunks/broker-<hash>.cjs)
//   dist/package.json                `"type": "commonjs"` for dist/ (the package is ESM)
// Start-up cost matters: Paseo spawns a process per operation and `signal` has a 750 ms budget
// that includes node start-up. An ES module entry costs node its ESM loader on every start, so
// what runs per operation is CommonJS.
import { build } from "esbuild";
import { readFileSync, mkdirSync, chmodSync, readdirSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { terminalSources } from "./terminal-sources.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = (p) => join(root, "dist", p);
mkdirSync(join(root, "dist"), { recursive: true });

const remoteTarget = { platform: "node", target: "node18", format: "cjs", bundle: true, legalComments: "none" };

await build({ ...remoteTarget, entryPoints: [join(root, "helper/src/run-helper.ts")], outfile: out("paseo-workspace-helper.cjs") });
chmodSync(out("paseo-workspace-helper.cjs"), 0o755);
const helperSource = readFileSync(out("paseo-workspace-helper.cjs"), "utf8");

await build({
  ...remoteTarget,
  entryPoints: [join(root, "src/remote-agent/run-agent.ts")],
  outfile: out("remote-agent.cjs"),
  define: { __HELPER_SOURCE__: JSON.stringify(helperSource), ...terminalSources(root) },
});
const agentSource = readFileSync(out("remote-agent.cjs"));
const agentHash = createHash("sha256").update(agentSource).digest("hex").slice(0, 16);

const dependencies = Object.keys(JSON.parse(readFileSync(join(root, "package.json"), "utf8")).dependencies);
const define = { __AGENT_HASH__: JSON.stringify(agentHash) };

/**
 * The broker's ssh2 is the parts it uses (client, agent, key parser), not ssh2's index, which also
 * loads its server, its HTTP agents (node's http, https and tls) and key generation: ~0.8 MB of
 * RSS for as long as the broker lives. A part the broker starts using must be added here.
 */
const ssh2Parts = {
  name: "ssh2-parts",
  setup(b) {
    b.onResolve({ filter: /^ssh2$/ }, () => ({ path: "ssh2", namespace: "ssh2-parts" }));
    b.onLoad({ filter: /.*/, namespace: "ssh2-parts" }, () => ({
      contents: [
        'const { OpenSSHAgent } = require("ssh2/lib/agent.js");',
        'const { parseKey } = require("ssh2/lib/protocol/keyParser.js");',
        'module.exports = { Client: require("ssh2/lib/client.js"), OpenSSHAgent, utils: { parseKey } };',
      ].join("\n"),
      resolveDir: root,
      loader: "js",
    }));
  },
};
// The broker, started once per host configuration, is one CommonJS bundle (an ES module entry
// costs its ESM loader in memory for the broker's whole life): a content-hashed file under
// dist/cli-chunks/ that dist/broker.js only requires. The hash of dist/broker.js is the broker
// version (src/broker/common/broker-paths.ts): a one-line file that still changes with every change of the
// broker or anything it bundles. Built first, so the operations are built with that hash in them
// instead of each process reading and hashing the file. Old bundles are left in place: a process
// started by a concurrent build still finds the one it names.
const brokerBuild = await build({
  platform: "node",
  target: "node20",
  format: "cjs",
  bundle: true,
  // zod inside, and p-retry, which is ESM only; import.meta.url is the bundle's own file URL.
  external: dependencies.filter((d) => d !== "zod" && d !== "p-retry"),
  entryPoints: { broker: join(root, "src/broker/process/entry.ts") },
  plugins: [ssh2Parts],
  outdir: out("cli-chunks"),
  entryNames: "[name]-[hash]",
  outExtension: { ".js": ".cjs" },
  supported: { "dynamic-import": false },
  define: { ...define, "import.meta.url": "__bundleUrl" },
  banner: { js: '"use strict";\nvar __bundleUrl = require("node:url").pathToFileURL(__filename).href;' },
  legalComments: "none",
  metafile: true,
});
const brokerBundle = Object.keys(brokerBuild.metafile.outputs).find((f) => brokerBuild.metafile.outputs[f].entryPoint);
writeFileSync(out("broker.js"), `require("./cli-chunks/${brokerBundle.replace(/^.*\//, "")}");\n`);
define.__BROKER_SCRIPT_HASH__ = JSON.stringify(
  createHash("sha256")
    .update(readFileSync(out("broker.js")))
    .digest("hex")
    .slice(0, 16),
);

// Operations as CommonJS bundles, everything but their CommonJS-loadable dependencies inside: zod
// as one parsed file instead of its many small modules, and p-retry, which is ESM only. Their
// import.meta.url is the bundle's own file URL. src/shared/errors.ts stays the dispatcher's
// (op-bundle.ts hands it over), so one RuntimeError class is thrown and recognised.
const SHARED_ERRORS_ID = "paseo-ssh-runtime:shared-errors"; // = op-bundle.ts SHARED_ERRORS_ID
const errorsPath = join(root, "src/shared/errors.ts");
const sharedErrors = {
  name: "shared-errors",
  setup(b) {
    b.onResolve({ filter: /\/errors\.js$/ }, (args) =>
      join(args.resolveDir, args.path.replace(/\.js$/, ".ts")) === errorsPath ? { path: SHARED_ERRORS_ID, external: true } : undefined,
    );
  },
};
/** Operations the dispatcher bundles itself: tiny, and run before any bundle would be loaded. */
const INLINE_OPS = new Set(["describe"]);
const opsDir = join(root, "src/cli/ops");
const bundledOps = readdirSync(opsDir)
  .filter((f) => f.endsWith(".ts") && f !== "registry.ts")
  .map((f) => f.slice(0, -3))
  .filter((op) => !INLINE_OPS.has(op));
/** Each bundle runs src/cli/one-shot-zod.ts (zod settings for a one-shot process) first, then the operation. */
const opEntries = {
  name: "op-entries",
  setup(b) {
    b.onResolve({ filter: /^op-entry:/ }, (args) => ({ path: args.path.slice("op-entry:".length), namespace: "op-entry" }));
    b.onLoad({ filter: /.*/, namespace: "op-entry" }, (args) => ({
      contents: `import ${JSON.stringify(join(root, "src/cli/one-shot-zod.ts"))};\nexport { default } from ${JSON.stringify(join(opsDir, `${args.path}.ts`))};\n`,
      resolveDir: root,
      loader: "js",
    }));
  },
};
/** What both CommonJS builds share; import.meta.url is the output file's own URL. */
const cjs = {
  platform: "node",
  target: "node20",
  format: "cjs",
  bundle: true,
  define: { ...define, "import.meta.url": "__bundleUrl" },
  // "use strict" first: the sources are ES modules, and a statement before esbuild's own
  // directive would leave the bundle in sloppy mode.
  banner: { js: '"use strict";\nvar __bundleUrl = require("node:url").pathToFileURL(__filename).href;' },
  legalComments: "none",
};
const opsBuild = await build({
  ...cjs,
  external: dependencies.filter((d) => d !== "zod" && d !== "p-retry"),
  entryPoints: Object.fromEntries(bundledOps.map((op) => [op, `op-entry:${op}`])),
  outdir: out("ops"),
  // Content-hashed names: a process started before a rebuild still finds the bundles it names,
  // and a code cache keyed by the name never meets other source.
  entryNames: "[name]-[hash]",
  outExtension: { ".js": ".cjs" },
  // import() of a dependency becomes require(): vm.Script offers no module loader.
  supported: { "dynamic-import": false },
  plugins: [sharedErrors, opEntries],
  metafile: true,
});
const opBundle = {};
for (const [file, meta] of Object.entries(opsBuild.metafile.outputs)) {
  if (!meta.entryPoint) continue;
  const op = meta.entryPoint.replace(/^op-entry:/, "");
  opBundle[op] = `ops/${file.replace(/^.*\//, "")}`;
  // vm.Script offers no module loader: a surviving import() would fail when reached.
  const text = readFileSync(join(root, file), "utf8");
  if (/\bimport\(/.test(text)) throw new Error(`${file} contains a dynamic import()`);
  // esbuild escapes every non-ASCII character but those of the comments it keeps; escaped there
  // too, the bundle is ASCII, which op-bundle.ts reads without UTF-8 decoding.
  const nonAscii = /[^\x00-\x7f]/g;
  if (nonAscii.test(text)) {
    const line = text.split("\n").find((l) => /[^\x00-\x7f]/.test(l) && !/^\s*(\/\/|\/\*|\*)/.test(l));
    if (line !== undefined) throw new Error(`${file}: non-ASCII outside a comment: ${line.trim().slice(0, 80)}`);
    writeFileSync(
      join(root, file),
      text.replace(nonAscii, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`),
    );
  }
}

// The dispatcher: each registry entry of a bundled operation becomes a lazily run module that
// loads the operation's bundle, so `describe` and argv refusals load none of them.
const registryPath = join(opsDir, "registry.ts");
const opLoaders = {
  name: "op-loaders",
  setup(b) {
    b.onResolve({ filter: /^\.\/[a-z-]+\.js$/ }, (args) => {
      const op = args.path.slice(2, -3);
      if (args.importer !== registryPath || !opBundle[op]) return undefined;
      return { path: op, namespace: "op-loader" };
    });
    b.onLoad({ filter: /.*/, namespace: "op-loader" }, (args) => ({
      contents: `import { loadOperationBundle } from ${JSON.stringify(join(root, "src/cli/op-bundle.ts"))};\nexport default loadOperationBundle(${JSON.stringify(opBundle[args.path])}).default;\n`,
      resolveDir: root,
      loader: "js",
    }));
  },
};
writeFileSync(out("package.json"), `${JSON.stringify({ type: "commonjs" })}\n`);
await build({
  ...cjs,
  external: dependencies.filter((d) => d !== "zod"),
  entryPoints: [join(root, "src/cli/dispatch.ts")],
  outfile: out("cli.js"),
  banner: { js: `#!/usr/bin/env node\n${cjs.banner.js}` },
  plugins: [opLoaders],
});
chmodSync(out("cli.js"), 0o755);
