// Import boundaries between the layers of docs/architecture.md, checked by `npm run lint`.
// Layers only point down: cli -> workspace, exec, demo -> mirror, broker -> transport -> contract, shared.
// The remote agent and the helper are separate bundles that run on the host with Node built-ins
// only; src/shared is bundled into the agent too. src/broker has three rooms: the broker process
// (process/, its own bundle), the operation side that reaches it (client/), and what both share
// (common/); the process and the client side meet only in common/.
const NPM = ["npm", "npm-dev", "npm-optional", "npm-peer", "npm-bundled", "npm-no-pkg", "npm-unknown"];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "agent-reaches-only-shared",
      comment: "The remote agent is its own bundle: it may use src/shared and nothing else of ours.",
      severity: "error",
      from: { path: "^src/remote-agent/" },
      to: { path: "^(src|helper)/", pathNot: "^src/(remote-agent|shared)/" },
    },
    {
      name: "runtime-does-not-import-agent",
      comment: "Runtime and agent meet only through the protocol in src/shared/agent-api.ts.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/remote-agent/" },
      to: { path: "^src/remote-agent/" },
    },
    {
      name: "shared-is-self-contained",
      comment: "src/shared is bundled into the agent: it imports nothing of ours outside itself.",
      severity: "error",
      from: { path: "^src/shared/" },
      to: { path: "^(src|helper)/", pathNot: "^src/shared/" },
    },
    {
      name: "host-bundles-use-built-ins-only",
      comment: "The agent, src/shared and the helper run on hosts that have node and nothing else.",
      severity: "error",
      from: { path: "^(src/remote-agent|src/shared|helper/src)/" },
      to: { dependencyTypes: NPM },
    },
    {
      name: "helper-is-self-contained",
      comment: "The workspace helper is its own bundle.",
      severity: "error",
      from: { path: "^helper/src/" },
      to: { path: "^src/" },
    },
    {
      name: "nothing-below-cli-imports-cli",
      comment: "Only src/cli builds CLI operations; lower layers take streams and options.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/cli/" },
      to: { path: "^src/cli/" },
    },
    {
      name: "contract-imports-only-shared",
      comment: "Paseo's wire shapes depend on nothing but shared errors.",
      severity: "error",
      from: { path: "^src/contract/" },
      to: { path: "^src/", pathNot: "^src/(contract|shared)/" },
    },
    {
      name: "transport-stays-below-broker",
      comment: "The broker uses the transport (SshHost, ssh-connection), never the other way.",
      severity: "error",
      from: { path: "^src/transport/" },
      to: { path: "^src/", pathNot: "^src/(transport|contract|shared)/" },
    },
    {
      name: "broker-stays-below-operations",
      comment: "The broker serves channels; it knows nothing of workspaces, exec, the demo or the CLI.",
      severity: "error",
      from: { path: "^src/broker/" },
      to: { path: "^src/(workspace|exec|demo|cli|mirror)/" },
    },
    {
      name: "mirror-stays-below-operations",
      comment:
        "src/mirror brings a workspace's work back (destroy, reconcile, merge-to-base, the live mirror): it uses the transport and shared code, never an operation, the CLI or the broker.",
      severity: "error",
      from: { path: "^src/mirror/" },
      to: { path: "^src/(workspace|exec|demo|cli|broker)/" },
    },
    {
      name: "broker-process-is-its-own-bundle",
      comment: "src/broker/process/ runs only inside dist/broker.js: nothing outside it imports it (the build names process/entry.ts).",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/broker/process/" },
      to: { path: "^src/broker/process/" },
    },
    {
      name: "broker-process-uses-only-common-broker-modules",
      comment:
        "The broker process meets the operation side of the broker (src/broker/client/: open-host, broker-host, connect-broker) only through src/broker/common/.",
      severity: "error",
      from: { path: "^src/broker/process/" },
      to: { path: "^src/broker/", pathNot: "^src/broker/(process|common)/" },
    },
    {
      name: "common-broker-modules-import-neither-side",
      comment: "What both broker sides share (src/broker/common/) depends on neither of them.",
      severity: "error",
      from: { path: "^src/broker/common/" },
      to: { path: "^src/broker/", pathNot: "^src/broker/common/" },
    },
    {
      name: "broker-has-three-rooms",
      comment: "Every broker module is in process/, client/ or common/: a file beside them would fall outside the rules above.",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^src/broker/[^/]+$" },
    },
    {
      name: "pool-placement-stands-alone",
      comment:
        "src/workspace/pool/ (where a pool's workspace lives) is reached by exec and the CLI too: it uses the broker's client side and nothing else of src/workspace.",
      severity: "error",
      from: { path: "^src/workspace/pool/" },
      to: { path: "^src/workspace/", pathNot: "^src/workspace/pool/" },
    },
    {
      name: "operations-do-not-import-each-other",
      comment:
        "The Paseo-host side of workspaces and of exec are siblings (exec finds a pool workspace's host through src/workspace/pool/); the demo drives the CLI as a process.",
      severity: "error",
      from: { path: "^src/(workspace|exec)/" },
      to: { path: "^src/(workspace|exec|demo)/", pathNot: ["^src/$1/", "^src/workspace/pool/"] },
    },
    {
      name: "no-circular",
      comment: "Import cycles hide the layering (and break class initialisation in bundles).",
      severity: "error",
      from: { path: "^(src|helper/src)/" },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    includeOnly: ["^src/", "^helper/src/", "^node_modules/"],
  },
};
