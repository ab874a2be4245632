// The import-boundary check of `npm run lint` (.dependency-cruiser.cjs) run on small fixture trees
// laid out like src/: every layering rule reports its upward import by name, and the same tree
// with only downward imports passes, so the check can fail and does not fail for nothing.
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const DEPCRUISE = join(REPO, "node_modules", ".bin", "depcruise");
const CONFIG = join(REPO, ".dependency-cruiser.cjs");
const s = suite("all");

/** A fixture project: `files` maps paths to sources; `fakepkg` is an npm dependency. */
function fixture(files: Record<string, string>): string {
  const dir = s.tmp("boundaries-");
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  };
  write("package.json", JSON.stringify({ name: "fixture", type: "module", dependencies: { fakepkg: "1.0.0" } }));
  write("tsconfig.json", JSON.stringify({ compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", strict: true } }));
  write("node_modules/fakepkg/package.json", JSON.stringify({ name: "fakepkg", version: "1.0.0", main: "index.js" }));
  write("node_modules/fakepkg/index.js", "module.exports = {};\n");
  for (const [path, text] of Object.entries(files)) write(path, text);
  return dir;
}

function cruise(dir: string): { code: number | null; out: string } {
  const r = spawnSync(DEPCRUISE, ["--config", CONFIG, "src", "helper/src"], { cwd: dir, encoding: "utf8", timeout: 60_000 });
  // Cycles are reported over several lines: compare with whitespace runs collapsed.
  return { code: r.status, out: `${r.stdout}${r.stderr}`.replace(/\s+/g, " ") };
}

const imports = (from: string) => `import { x } from "${from}";\nexport const y = x;\n`;
const leaf = "export const x = 1;\n";

describe("import boundaries", () => {
  it("report every upward or sideways import by its rule", () => {
    const dir = fixture({
      "src/shared/s.ts": leaf,
      "src/shared/bad.ts": imports("../transport/t.js"),
      "src/contract/c.ts": imports("../broker/b.js"),
      "src/transport/t.ts": imports("../broker/b.js"),
      "src/broker/b.ts": imports("../exec/e.js"),
      "src/broker/client/open.ts": imports("../process/q.js"),
      "src/broker/common/wire.ts": imports("../client/open.js"),
      "src/broker/process/p.ts": imports("../client/open.js"),
      "src/broker/process/q.ts": leaf,
      "src/broker/loose.ts": leaf,
      "src/broker/client/uses-loose.ts": imports("../loose.js"),
      "src/workspace/pool/pool.ts": imports("../w.js"),
      "src/exec/e.ts": imports("../workspace/w.js"),
      "src/workspace/w.ts": imports("../cli/c.js"),
      "src/cli/c.ts": imports("../remote-agent/a.js"),
      "src/remote-agent/a.ts": imports("../transport/t.js"),
      "src/remote-agent/npm.ts": imports("fakepkg"),
      "helper/src/h.ts": imports("../../src/shared/s.js"),
      "src/demo/cycle-a.ts": imports("./cycle-b.js"),
      "src/demo/cycle-b.ts": imports("./cycle-a.js"),
    });
    const r = cruise(dir);
    expect(r.code).not.toBe(0);
    for (const rule of [
      "shared-is-self-contained: src/shared/bad.ts → src/transport/t.ts",
      "contract-imports-only-shared: src/contract/c.ts → src/broker/b.ts",
      "transport-stays-below-broker: src/transport/t.ts → src/broker/b.ts",
      "broker-stays-below-operations: src/broker/b.ts → src/exec/e.ts",
      "broker-process-is-its-own-bundle: src/broker/client/open.ts → src/broker/process/q.ts",
      "broker-process-uses-only-common-broker-modules: src/broker/process/p.ts → src/broker/client/open.ts",
      "common-broker-modules-import-neither-side: src/broker/common/wire.ts → src/broker/client/open.ts",
      "broker-has-three-rooms: src/broker/client/uses-loose.ts → src/broker/loose.ts",
      "pool-placement-stands-alone: src/workspace/pool/pool.ts → src/workspace/w.ts",
      "operations-do-not-import-each-other: src/exec/e.ts → src/workspace/w.ts",
      "nothing-below-cli-imports-cli: src/workspace/w.ts → src/cli/c.ts",
      "runtime-does-not-import-agent: src/cli/c.ts → src/remote-agent/a.ts",
      "agent-reaches-only-shared: src/remote-agent/a.ts → src/transport/t.ts",
      "host-bundles-use-built-ins-only: src/remote-agent/npm.ts → node_modules/fakepkg/index.js",
      "helper-is-self-contained: helper/src/h.ts → src/shared/s.ts",
      "no-circular: src/demo/cycle-a.ts → src/demo/cycle-b.ts",
    ]) {
      expect(r.out).toContain(rule);
    }
  });

  it("pass a tree whose imports only point down", () => {
    const dir = fixture({
      "src/shared/s.ts": `import { readFileSync } from "node:fs";\nexport const x = readFileSync;\n`,
      "src/contract/c.ts": imports("../shared/s.js"),
      "src/transport/t.ts": imports("../contract/c.js"),
      "src/broker/client/b.ts": imports("../../transport/t.js"),
      "src/broker/common/wire.ts": imports("../../transport/t.js"),
      "src/broker/client/open.ts": imports("../common/wire.js"),
      "src/broker/process/p.ts": imports("../common/wire.js"),
      "src/workspace/pool/pool.ts": imports("../../broker/client/open.js"),
      "src/exec/e.ts": imports("../broker/client/b.js"),
      "src/exec/located.ts": imports("../workspace/pool/pool.js"),
      "src/workspace/w.ts": imports("fakepkg"),
      "src/cli/c.ts": imports("../exec/e.js"),
      "src/remote-agent/a.ts": imports("../shared/s.js"),
      "helper/src/h.ts": imports("./g.js"),
      "helper/src/g.ts": leaf,
    });
    const r = cruise(dir);
    expect(r.out).toContain("no dependency violations found");
    expect(r.code).toBe(0);
  });
});
