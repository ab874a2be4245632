// The benchmark's sshd is the test rig's (test/rig/global-setup.ts), so "measured" and "tested"
// mean the same server. That module is TypeScript written for vitest's globalSetup; esbuild turns
// it into a temporary ES module that plain node can import and run outside vitest.
import { build } from "esbuild";
import { mkdtempSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Starts the rig; resolves to { info (RigInfo), stop() }. */
export async function startRig() {
  // The benchmark measures OpenSSH: the rig must not fall back to its embedded server.
  process.env.PASEO_TEST_SERVER = "openssh";
  // Inside the repository, so the bundle's package imports (ssh2) resolve from node_modules.
  const dir = mkdtempSync(join(ROOT, "node_modules", ".paseo-bench-rig-"));
  const outfile = join(dir, "global-setup.mjs");
  try {
    await build({
      entryPoints: [join(ROOT, "test/rig/global-setup.ts")],
      bundle: true,
      platform: "node",
      format: "esm",
      packages: "external",
      outfile,
      logLevel: "error",
    });
    const { default: setup } = await import(pathToFileURL(outfile).href);
    const teardown = await setup();
    const info = JSON.parse(process.env.PASEO_TEST_RIG);
    return {
      info,
      async stop() {
        await teardown();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Runtime options that reach the rig's sshd through `port` (its own, or a delay proxy's in front
 * of it) with `~/<rootName>` as the remote root; every group keeps a root of its own.
 */
export function rigOptions(ctx, port, rootName, extra = {}) {
  const { rig, knownHostsFile } = ctx;
  return { host: "127.0.0.1", port, user: rig.user, identityFile: rig.identityFile, knownHostsFile, root: `~/${rootName}`, ...extra };
}

/** OpenSSH client arguments for the rig's sshd through `port` (the bench's known_hosts and key), then `args`. */
export const sshArgs = (ctx, port, ...args) => ["-p", String(port), ...ctx.sshBase, ...args];
