// The ssh -G answer cache against OpenSSH itself: a counting wrapper around the real ssh shows
// when ssh was asked, and every answer is compared with what ssh says. Remembered answers must
// follow edits of the config, of an Included file and of a glob Include's directory, the
// environment variables the config names and the ssh binary; Match exec configs are never kept.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { cachedSshG, scanInputs } from "../../src/transport/ssh-config/ssh-g-cache.js";
import { findSsh, runSshG, type EvalRequest } from "../../src/transport/ssh-config/ssh-g.js";
import { resolvePlan } from "../../src/transport/ssh-config/resolve.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { localIdentity } from "../../src/transport/ssh-config/tokens.js";
import { needs, unless } from "../support/needs.js";

const realSsh = findSsh();
const root = suite("all").tmp("paseo-sshg-cache-");
const local = localIdentity();

/** Writes a file and dates it a minute back, as an edit made a while ago looks. */
function put(path: string, text: string): void {
  writeFileSync(path, text);
  const past = new Date(Date.now() - 60_000);
  utimesSync(path, past, past);
}

describe("ssh -G answers kept between processes", unless(needs.command("ssh", "OpenSSH's client answers ssh -G")), () => {
  let dir: string;
  let cache: string;
  let wrapper: string;
  let calls: string;
  const askedSsh = () => readFileSync(calls, "utf8").split("\n").filter(Boolean).length;

  beforeEach(() => {
    dir = mkdtempSync(join(root, "case-"));
    cache = join(dir, "cache");
    mkdirSync(cache, { mode: 0o700 });
    calls = join(dir, "calls");
    writeFileSync(calls, "");
    wrapper = join(dir, "bin", "ssh");
    mkdirSync(join(dir, "bin"));
    writeFileSync(wrapper, `#!/bin/sh\necho "$*" >> '${calls}'\nexec '${realSsh}' "$@"\n`, { mode: 0o755 });
  });

  /** The cached answer, checked against a fresh `ssh -G` of the same request. */
  async function answer(req: EvalRequest): Promise<Map<string, string[]>> {
    const dump = await cachedSshG(wrapper, req, local, cache);
    expect(dump).toEqual(await runSshG(realSsh!, req));
    return dump;
  }

  it("asks ssh once while nothing changes, again after an edit of the config, an Included file or a glob directory", async () => {
    const cfg = join(dir, "main.conf");
    mkdirSync(join(dir, "inc.d"));
    put(cfg, `Include ${dir}/inc.d/*.conf\nHost h1\n  Port 2201\n`);
    put(join(dir, "inc.d", "b.conf"), "Host h1\n  User alice\n");
    const req: EvalRequest = { file: cfg, alias: "h1" };

    expect((await answer(req)).get("port")).toEqual(["2201"]);
    expect(askedSsh()).toBe(1);
    expect((await answer(req)).get("user")).toEqual(["alice"]);
    expect(askedSsh()).toBe(1);

    put(cfg, `Include ${dir}/inc.d/*.conf\nHost h1\n  Port 2202\n`);
    expect((await answer(req)).get("port")).toEqual(["2202"]);
    expect(askedSsh()).toBe(2);

    put(join(dir, "inc.d", "b.conf"), "Host h1\n  User bob\n");
    expect((await answer(req)).get("user")).toEqual(["bob"]);
    expect(askedSsh()).toBe(3);

    // A new file the glob picks up, sorted before the other: its User is read first and wins.
    put(join(dir, "inc.d", "a.conf"), "Host h1\n  User carol\n");
    expect((await answer(req)).get("user")).toEqual(["carol"]);
    expect(askedSsh()).toBe(4);
    await answer(req);
    expect(askedSsh()).toBe(4);

    // Another alias or explicit user is another question.
    expect((await answer({ ...req, user: "dave" })).get("user")).toEqual(["dave"]);
    expect(askedSsh()).toBe(5);
  });

  it("follows a file an Include names before it exists", async () => {
    const cfg = join(dir, "main.conf");
    put(cfg, `Include ${dir}/later.conf\nHost h1\n  Port 2201\n`);
    const req: EvalRequest = { file: cfg, alias: "h1" };
    expect((await answer(req)).get("port")).toEqual(["2201"]);
    await answer(req);
    expect(askedSsh()).toBe(1);
    put(join(dir, "later.conf"), "Host h1\n  Port 2299\n");
    expect((await answer(req)).get("port")).toEqual(["2299"]);
    expect(askedSsh()).toBe(2);
  });

  it("keys the answer by the environment variables the config names", async () => {
    const cfg = join(dir, "main.conf");
    put(cfg, "Host h1\n  IdentityAgent ${PASEO_SSHG_CACHE_TEST}\n");
    const req: EvalRequest = { file: cfg, alias: "h1" };
    process.env.PASEO_SSHG_CACHE_TEST = "/tmp/agent-one.sock";
    try {
      await answer(req);
      await answer(req);
      expect(askedSsh()).toBe(1);
      process.env.PASEO_SSHG_CACHE_TEST = "/tmp/agent-two.sock";
      await answer(req);
      expect(askedSsh()).toBe(2);
    } finally {
      delete process.env.PASEO_SSHG_CACHE_TEST;
    }
  });

  it("never keeps an answer that Match exec decided, and asks again after the ssh binary changes", async () => {
    const cfg = join(dir, "main.conf");
    put(cfg, `Match exec "test -e ${dir}/flag"\n  Port 2203\n`);
    const req: EvalRequest = { file: cfg, alias: "h1" };
    expect(scanInputs(req, local).cacheable).toBe(false);
    expect((await answer(req)).get("port")).toEqual(["22"]);
    writeFileSync(join(dir, "flag"), "");
    expect((await answer(req)).get("port")).toEqual(["2203"]);
    expect(askedSsh()).toBe(2);

    const plain = join(dir, "plain.conf");
    put(plain, "Host h1\n  Port 2204\n");
    await answer({ file: plain, alias: "h1" });
    await answer({ file: plain, alias: "h1" });
    expect(askedSsh()).toBe(3);
    // Same path, another binary (an upgrade): its defaults may differ.
    writeFileSync(wrapper, `#!/bin/sh\necho "$*" >> '${calls}'\nexec '${realSsh}' "$@"\n# v2\n`, { mode: 0o755 });
    await answer({ file: plain, alias: "h1" });
    expect(askedSsh()).toBe(4);
  });

  it("never keeps an answer that Match exec=cmd or localnetwork=net decided (OpenSSH splits on = too)", async () => {
    const cfg = join(dir, "eq.conf");
    put(cfg, `Match exec="test -e ${dir}/flag2"\n  Port 2205\n`);
    const req: EvalRequest = { file: cfg, alias: "h1" };
    expect(scanInputs(req, local).cacheable).toBe(false);
    expect((await answer(req)).get("port")).toEqual(["22"]);
    writeFileSync(join(dir, "flag2"), "");
    // A stale entry would still say 22: ssh itself now answers 2205.
    expect((await answer(req)).get("port")).toEqual(["2205"]);
    expect(askedSsh()).toBe(2);
    for (const line of ["Match host=h1 !exec=false", "Match\tExec=true", "Match localnetwork=10.0.0.0/8", "Match=exec true"]) {
      put(cfg, `${line}\n  Port 2206\n`);
      expect(scanInputs(req, local).cacheable, line).toBe(false);
    }
    put(cfg, "Match host=h1 user=executive\n  Port 2207\n");
    expect(scanInputs(req, local).cacheable).toBe(true);
  });

  it("ignores an entry that is not private to us", async () => {
    const cfg = join(dir, "main.conf");
    put(cfg, "Host h1\n  Port 2205\n");
    const req: EvalRequest = { file: cfg, alias: "h1" };
    await answer(req);
    await answer(req);
    expect(askedSsh()).toBe(1);
    const [entry] = readdirSync(cache);
    chmodSync(join(cache, entry!), 0o644);
    await answer(req);
    expect(askedSsh()).toBe(2);
  });

  it("resolvePlan uses it only when given a directory, and doctor's provenance pass never", async () => {
    const cfg = join(dir, "main.conf");
    put(cfg, "Host h1\n  HostName 127.0.0.9\n  Port 2206\n");
    const options = parseRuntimeOptions({ host: "h1", sshConfig: cfg });
    const path = process.env.PATH;
    process.env.PATH = `${join(dir, "bin")}:${path}`;
    try {
      for (let i = 0; i < 2; i++) expect((await resolvePlan(options, { cacheDir: cache })).hops[0]!.port).toBe(2206);
      expect(askedSsh()).toBe(1);
      await resolvePlan(options);
      expect(askedSsh()).toBe(2);
      await resolvePlan(options, { cacheDir: cache, provenance: true });
      expect(askedSsh()).toBe(3);
    } finally {
      process.env.PATH = path;
    }
  });
});
