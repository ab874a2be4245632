// The operation bundles' V8 code cache (src/cli/op-bundle.ts) through the real executable, with a
// private TMPDIR as the broker directory's home: nothing is created where no runtime process made
// the directory; the first successful run writes the cache (a refused one does not), later runs use
// it without rewriting; a cache others could write, or one that is damaged, is never used, and the
// answer stays byte for byte the same; caches of other builds of the operation are removed.
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { brokerDirCandidates } from "../../src/broker/common/broker-paths.js";
import { runCli } from "../support/run-cli.js";

const tmp = suite("all").tmp("paseo-code-cache-");

const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp };
delete env.XDG_RUNTIME_DIR;
const [privateDir] = brokerDirCandidates({ tmp });
let expected: string | undefined;

/** `config` prints an entry without reaching the host: runs the config bundle to success. */
async function config(): Promise<void> {
  const r = await runCli(["config", "--host", "buildbox.invalid"], { env });
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  expected ??= r.stdout.toString("utf8");
  expect(r.stdout.toString("utf8")).toBe(expected);
}

/** `inspect` refusing its request: loads and runs the inspect bundle, exits 2. */
async function refusedInspect(): Promise<void> {
  const r = await runCli(["inspect", "--workspace-id", "w"], { stdin: "{}", env });
  expect(r.stderr).toBe("unsupported protocol version undefined; expected 1\n");
  expect(r.code).toBe(2);
}

const caches = (op = "config") => readdirSync(privateDir!).filter((f) => f.startsWith(`v8-${op}-`));
const identity = (f: string) => {
  const st = statSync(join(privateDir!, f));
  return { ino: st.ino, mtimeMs: st.mtimeMs, mode: st.mode & 0o777 };
};

describe("code cache of the operation bundles", () => {
  it("creates no directory of its own", async () => {
    await config();
    expect(readdirSync(tmp)).toEqual([]);
  });

  it("is written by the first successful run and then used as it is", async () => {
    mkdirSync(privateDir!, { mode: 0o700 });
    await refusedInspect();
    expect(caches("inspect")).toEqual([]);
    await config();
    expect(caches()).toHaveLength(1);
    const [cache] = caches();
    expect(cache).toMatch(new RegExp(`^v8-config-[A-Z0-9]+-${process.version}-${process.arch}\\.bin$`));
    const first = identity(cache!);
    expect(first.mode).toBe(0o600);
    await config();
    await config();
    // Accepted by V8, so never rewritten.
    expect(identity(cache!)).toEqual(first);
  });

  it("ignores a cache others could write, and one that is damaged, and replaces both", async () => {
    const [cache] = caches();
    const path = join(privateDir!, cache!);
    chmodSync(path, 0o666);
    const before = identity(cache!);
    await config();
    expect(identity(cache!).mode).toBe(0o600);
    expect(identity(cache!).ino).not.toBe(before.ino);

    const garbage = Buffer.alloc(statSync(path).size, 0x5a);
    writeFileSync(path, garbage);
    await config();
    expect(readFileSync(path).equals(garbage)).toBe(false);
  });

  it("removes the operation's caches of other builds when it writes one", async () => {
    const stale = join(privateDir!, `v8-config-OLDBUILD-${process.version}-${process.arch}.bin`);
    const other = join(privateDir!, `v8-pause-OLDBUILD-${process.version}-${process.arch}.bin`);
    writeFileSync(stale, "x", { mode: 0o600 });
    writeFileSync(other, "x", { mode: 0o600 });
    rmSync(
      join(
        privateDir!,
        caches().find((f) => !f.includes("OLDBUILD"))!,
      ),
    );
    await config();
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(other)).toBe(true);
    expect(caches()).toHaveLength(1);
  });

  it("loads bundles that are ASCII throughout (read without UTF-8 decoding)", () => {
    const dist = join(import.meta.dirname, "../../dist");
    const bundles = [...readFileSync(join(dist, "cli.js"), "latin1").matchAll(/loadOperationBundle\("(ops\/[^"]+)"\)/g)].map((m) => m[1]!);
    expect(bundles.length).toBeGreaterThan(10);
    for (const file of bundles) {
      const bytes = readFileSync(join(dist, file));
      expect({ file, ascii: bytes.every((b) => b < 0x80) }).toEqual({ file, ascii: true });
    }
  });
});
