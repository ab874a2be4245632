// The long-lived `watch` session (docs/contract.md#helper-watch): NDJSON framing, fatal commands, acknowledgements, debounce and change reporting.
import { appendFileSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ensureHelperBuilt, makeFixture, runJson, sleep, type Fixture } from "../support/helper.js";
import { WatchClient } from "../support/watch-client.js";

let fx: Fixture;
const clients: WatchClient[] = [];

function watch(): WatchClient {
  const client = new WatchClient(fx.workspace);
  clients.push(client);
  return client;
}

beforeAll(() => ensureHelperBuilt());
beforeEach(() => {
  fx = makeFixture();
  writeFileSync(fx.path("notes.txt"), "before\n");
});
afterEach(async () => {
  for (const client of clients.splice(0)) {
    client.kill("SIGKILL");
    await client.exited.catch(() => undefined);
  }
  fx.cleanup();
});

const READY = { protocolVersion: 1, type: "ready" };

describe("watch framing and fatal input", () => {
  it("acknowledges a subscribe split across writes, then dies on not-json", async () => {
    const client = watch();
    const frame = JSON.stringify({ protocolVersion: 1, type: "subscribe", id: "s", paths: ["."], recursive: false, ignoredPaths: [] });
    client.write(frame.slice(0, 20));
    await sleep(50);
    client.write(`${frame.slice(20)}\n`);
    await client.waitFor((l) => l.type === "subscribed");
    client.write("not-json\n");
    client.end();
    const result = await client.exited;
    expect({ code: result.code, signal: result.signal }).toEqual({ code: 1, signal: null });
    const stdout = result.stdout.toString();
    expect(stdout).toContain('"type":"ready"');
    expect(stdout).toContain('"type":"subscribed"');
    expect(result.stderr).toMatch(/JSON|Unexpected token/);
  });

  it("prints ready first and handles CRLF and a final unterminated line", async () => {
    const client = watch();
    client.write('{"protocolVersion":1,"type":"subscribe","id":"a","paths":[]}\r\n');
    client.end('{"protocolVersion":1,"type":"unsubscribe","id":"a"}');
    const result = await client.exited;
    expect(result.code).toBe(0);
    expect(client.lines).toEqual([
      READY,
      { protocolVersion: 1, type: "subscribed", subscriptionId: "a" },
      { protocolVersion: 1, type: "unsubscribed", subscriptionId: "a" },
    ]);
  });

  it("refuses a subscribe that supplies a root, without acknowledging it", async () => {
    mkdirSync(fx.path("..", "untrusted"));
    writeFileSync(fx.path("..", "untrusted", "outside.txt"), "x");
    const client = watch();
    client.write(
      `${JSON.stringify({ protocolVersion: 1, type: "subscribe", id: "s", root: fx.path("..", "untrusted"), paths: ["outside.txt"], recursive: false, ignoredPaths: [] })}\n`,
    );
    client.end('{"protocolVersion":1,"type":"close"}\n');
    const result = await client.exited;
    expect({ code: result.code, signal: result.signal }).toEqual({ code: 1, signal: null });
    expect(result.stderr).toContain("Watch subscriptions cannot supply a root");
    expect(result.stdout.toString()).not.toContain("subscribed");
  });

  const fatal: Array<[string, string, RegExp]> = [
    ["a blank line", "\n", /JSON/],
    ["non-object JSON", "null\n", /Unsupported workspace-helper protocol/],
    ["a string protocolVersion", '{"protocolVersion":"1","type":"close"}\n', /^Unsupported workspace-helper protocol\n$/],
    ["a root key on close", '{"protocolVersion":1,"type":"close","root":null}\n', /^Watch subscriptions cannot supply a root\n$/],
    ["non-array paths", '{"protocolVersion":1,"type":"subscribe","id":"x","paths":"notes.txt"}\n', /is not iterable/],
    [
      "an escaping path",
      '{"protocolVersion":1,"type":"subscribe","id":"x","paths":["../outside.txt"]}\n',
      /^Access outside of workspace is not allowed\n$/,
    ],
    [
      "an absolute path",
      '{"protocolVersion":1,"type":"subscribe","id":"x","paths":["/etc"]}\n',
      /^Access outside of workspace is not allowed\n$/,
    ],
    [
      "a missing parent",
      '{"protocolVersion":1,"type":"subscribe","id":"x","paths":["no/such/file"]}\n',
      /^ENOENT: no such file or directory, realpath '.*\/workspace\/no\/such'\n$/,
    ],
  ];
  it.each(fatal)("exits 1 on %s", async (_name, input, stderr) => {
    const client = watch();
    client.end(input);
    const result = await client.exited;
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(stderr);
    expect(result.stdout.toString()).not.toContain("subscribed");
  });

  it("ignores unknown command types and exits 0 at EOF", async () => {
    const client = watch();
    client.end('{"protocolVersion":1,"type":"bogus"}\n{"protocolVersion":1,"type":"unsubscribe","id":"never"}\n');
    const result = await client.exited;
    expect(result.code).toBe(0);
    expect(client.lines).toEqual([READY, { protocolVersion: 1, type: "unsubscribed", subscriptionId: "never" }]);
  });

  it("exits 0 on close at once, while stdin is still open", async () => {
    const client = watch();
    await client.subscribe("s", ["notes.txt"]);
    client.send({ protocolVersion: 1, type: "close" });
    const result = await client.exited;
    expect({ code: result.code, signal: result.signal }).toEqual({ code: 0, signal: null });
  });
});

describe("watch change reporting", () => {
  it("reports an external rewrite of a watched file within 5 s, then exits 0 on close", async () => {
    const client = watch();
    await client.subscribe("proof", ["notes.txt"]);
    writeFileSync(fx.path("notes.txt"), "rewritten by another process\n");
    const changed = await client.waitFor((l) => l.type === "changed", 5000);
    expect(changed).toEqual({ protocolVersion: 1, type: "changed", subscriptionId: "proof", paths: ["notes.txt"] });
    const result = await client.close();
    expect(result.code).toBe(0);
  });

  it("sees a rewrite done by the helper's own fs-write (atomic rename)", async () => {
    const client = watch();
    await client.subscribe("w", ["notes.txt"]);
    expect(await runJson(["fs-write", "--path", "notes.txt"], { cwd: fx.workspace, input: "after\n" })).toMatchObject({
      status: "written",
    });
    expect(await client.waitFor((l) => l.type === "changed")).toMatchObject({ subscriptionId: "w", paths: ["notes.txt"] });
  });

  it("reports the subscribed path, never a sibling with the same basename", async () => {
    for (const dir of ["a", "b"]) {
      mkdirSync(fx.path(dir));
      writeFileSync(fx.path(dir, "file.txt"), dir);
    }
    const client = watch();
    await client.subscribe("s", ["a/file.txt", "b/file.txt"]);
    writeFileSync(fx.path("a", "file.txt"), "changed");
    expect((await client.waitFor((l) => l.type === "changed")).paths).toEqual(["a/file.txt"]);
    await sleep(300);
    expect(client.changes("s")).toEqual([["a/file.txt"]]);
  });

  it("debounces a burst into one event per path, and each subscription gets its own", async () => {
    writeFileSync(fx.path("other.txt"), "o");
    const client = watch();
    await client.subscribe("one", ["notes.txt", "other.txt"]);
    await client.subscribe("two", ["notes.txt"]);
    for (let i = 0; i < 20; i += 1) appendFileSync(fx.path("notes.txt"), `${i}\n`);
    appendFileSync(fx.path("other.txt"), "x");
    await client.waitFor((l) => l.type === "changed" && l.subscriptionId === "two");
    await sleep(400);
    expect(client.changes("one").sort()).toEqual([["notes.txt"], ["other.txt"]]);
    expect(client.changes("two")).toEqual([["notes.txt"]]);
  });

  it("reports a file that did not exist at subscribe time, across a clean restart", async () => {
    const first = watch();
    await first.subscribe("subscription-1", ["later.txt"]);
    first.send({ protocolVersion: 1, type: "unsubscribe", id: "subscription-1" });
    await first.waitFor((l) => l.type === "unsubscribed");
    expect((await first.close()).code).toBe(0);

    const second = watch();
    await second.subscribe("subscription-1", ["later.txt"]);
    await sleep(200);
    expect(second.changes("subscription-1")).toEqual([]);
    writeFileSync(fx.path("later.txt"), "now\n");
    expect(await second.waitFor((l) => l.type === "changed")).toEqual({
      protocolVersion: 1,
      type: "changed",
      subscriptionId: "subscription-1",
      paths: ["later.txt"],
    });
  });

  it("catches delete-then-create and atomic-rename saves", async () => {
    const client = watch();
    await client.subscribe("s", ["notes.txt"]);
    rmSync(fx.path("notes.txt"));
    await client.waitFor((l) => l.type === "changed");
    await sleep(150);
    const seen = client.lines.length;
    writeFileSync(fx.path("tmp-save"), "saved");
    renameSync(fx.path("tmp-save"), fx.path("notes.txt"));
    expect(await client.waitFor((l) => l.type === "changed", 5000, seen)).toMatchObject({ paths: ["notes.txt"] });
  });

  it("stops reporting after unsubscribe and replaces a subscription reusing an id", async () => {
    writeFileSync(fx.path("other.txt"), "o");
    const client = watch();
    await client.subscribe("s", ["notes.txt"]);
    await client.subscribe("s", ["other.txt"]);
    writeFileSync(fx.path("notes.txt"), "n");
    writeFileSync(fx.path("other.txt"), "o2");
    await client.waitFor((l) => l.type === "changed");
    await sleep(300);
    expect(client.changes("s")).toEqual([["other.txt"]]);
    client.send({ protocolVersion: 1, type: "unsubscribe", id: "s" });
    await client.waitFor((l) => l.type === "unsubscribed");
    const seen = client.lines.length;
    writeFileSync(fx.path("other.txt"), "o3");
    await sleep(300);
    expect(client.lines.slice(seen)).toEqual([]);
  });

  it("follows the reference session: recursive tree, new directories, ignored paths", async () => {
    mkdirSync(fx.path("sub"));
    writeFileSync(fx.path("sub", "inner.txt"), "i");
    mkdirSync(fx.path("docs"));
    const client = watch();
    client.send({
      protocolVersion: 1,
      type: "subscribe",
      id: "a",
      paths: ["notes.txt", "sub/inner.txt", "later.txt"],
      recursive: false,
      ignoredPaths: [],
    });
    client.send({ protocolVersion: 1, type: "subscribe", id: "r", paths: ["."], recursive: true, ignoredPaths: ["docs"] });
    await client.waitFor((l) => l.type === "subscribed" && l.subscriptionId === "r");
    expect(client.lines.slice(0, 3)).toEqual([
      READY,
      { protocolVersion: 1, type: "subscribed", subscriptionId: "a" },
      { protocolVersion: 1, type: "subscribed", subscriptionId: "r" },
    ]);

    const step = async (action: () => void, expected: Array<[string, string]>) => {
      const from = client.lines.length;
      action();
      for (const [id, path] of expected) {
        await client.waitFor((l) => l.type === "changed" && l.subscriptionId === id && (l.paths as string[])[0] === path, 5000, from);
      }
      return from;
    };
    await step(
      () => writeFileSync(fx.path("notes.txt"), "after\n"),
      [
        ["a", "notes.txt"],
        ["r", "notes.txt"],
      ],
    );
    await step(
      () => writeFileSync(fx.path("later.txt"), "l"),
      [
        ["a", "later.txt"],
        ["r", "later.txt"],
      ],
    );
    await step(() => mkdirSync(fx.path("newdir")), [["r", "newdir"]]);
    await step(() => writeFileSync(fx.path("newdir", "deep.txt"), "d"), [["r", "newdir/deep.txt"]]);
    const from = client.lines.length;
    writeFileSync(fx.path("docs", "ignored.txt"), "secret");
    await sleep(300);
    expect(client.lines.slice(from)).toEqual([]);

    client.send({ protocolVersion: 1, type: "unsubscribe", id: "a" });
    client.send({ protocolVersion: 1, type: "unsubscribe", id: "never" });
    await client.waitFor((l) => l.type === "unsubscribed" && l.subscriptionId === "never");
    expect(client.lines.slice(-2)).toEqual([
      { protocolVersion: 1, type: "unsubscribed", subscriptionId: "a" },
      { protocolVersion: 1, type: "unsubscribed", subscriptionId: "never" },
    ]);
    const result = await client.close();
    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
  });

  it("reports nested ignored paths nowhere and never shows fs-write temp files", async () => {
    mkdirSync(fx.path("ignored", "deeper"), { recursive: true });
    mkdirSync(fx.path("src"));
    writeFileSync(fx.path("src", "a.ts"), "a");
    const client = watch();
    await client.subscribe("b", ["."], true, ["ignored"]);
    writeFileSync(fx.path("ignored", "secret.txt"), "s");
    writeFileSync(fx.path("ignored", "deeper", "x"), "s");
    expect(await runJson(["fs-write", "--path", "src/a.ts"], { cwd: fx.workspace, input: "b" })).toMatchObject({ status: "written" });
    await client.waitFor((l) => l.type === "changed" && (l.paths as string[])[0] === "src/a.ts");
    await sleep(300);
    expect(client.changes("b")).toEqual([["src/a.ts"]]);
  });

  it("reports a deleted directory by its own path and watches one re-created in its place", async () => {
    mkdirSync(fx.path("build", "sub"), { recursive: true });
    const client = watch();
    await client.subscribe("t", ["."], true);
    rmSync(fx.path("build"), { recursive: true });
    mkdirSync(fx.path("build"));
    await client.waitFor((l) => l.type === "changed" && (l.paths as string[])[0] === "build");
    await sleep(200);
    const from = client.lines.length;
    writeFileSync(fx.path("build", "out.js"), "o");
    await client.waitFor((l) => l.type === "changed" && (l.paths as string[])[0] === "build/out.js", 5000, from);
    // libuv names self events after the directory; they must not become `build/build`.
    expect(
      client
        .changes("t")
        .flat()
        .filter((p) => p.endsWith("build/build") || p.endsWith("sub/sub")),
    ).toEqual([]);
  });

  it("keeps watching a directory whose same-named child was deleted", async () => {
    mkdirSync(fx.path("lib", "lib"), { recursive: true });
    const client = watch();
    await client.subscribe("t", ["."], true);
    rmSync(fx.path("lib", "lib"), { recursive: true });
    await client.waitFor((l) => l.type === "changed");
    await sleep(200);
    const from = client.lines.length;
    writeFileSync(fx.path("lib", "x.txt"), "x");
    await client.waitFor((l) => l.type === "changed" && (l.paths as string[])[0] === "lib/x.txt", 5000, from);
  });

  it("normalises ignored paths before matching", async () => {
    mkdirSync(fx.path("out"));
    const client = watch();
    await client.subscribe("t", ["."], true, ["./out/"]);
    writeFileSync(fx.path("out", "x"), "x");
    writeFileSync(fx.path("notes.txt"), "n");
    await client.waitFor((l) => l.type === "changed");
    await sleep(300);
    expect(client.changes("t")).toEqual([["notes.txt"]]);
  });

  it("arms a 2,000-directory tree well within Paseo's 3 s acknowledgement budget", async () => {
    for (let a = 0; a < 40; a += 1) for (let b = 0; b < 50; b += 1) mkdirSync(fx.path(`d${a}`, `e${b}`), { recursive: true });
    const client = watch();
    const started = Date.now();
    await client.subscribe("big", ["."], true);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeLessThan(3000);
    writeFileSync(fx.path("d39", "e49", "deep.txt"), "x");
    expect((await client.waitFor((l) => l.type === "changed")).paths).toEqual(["d39/e49/deep.txt"]);
  });

  it("does not follow symlinked directories in a recursive watch", async () => {
    mkdirSync(fx.path("real"));
    symlinkSync("real", fx.path("alias"));
    const client = watch();
    await client.subscribe("t", ["alias"], true);
    writeFileSync(fx.path("real", "f.txt"), "f");
    await client.waitFor((l) => l.type === "changed");
    await sleep(200);
    // `alias` resolves to the canonical `real`, which is watched as a tree and reported canonically.
    expect(client.changes("t")).toEqual([["real/f.txt"]]);
  });

  it("survives SIGKILL of one session: a new one re-subscribes and reports later writes", async () => {
    const first = watch();
    await first.subscribe("subscription-1", ["watched.txt"]);
    first.kill("SIGKILL");
    expect((await first.exited).signal).toBe("SIGKILL");
    const second = watch();
    await second.subscribe("subscription-1", ["watched.txt"]);
    writeFileSync(fx.path("watched.txt"), "w");
    expect((await second.waitFor((l) => l.type === "changed")).paths).toEqual(["watched.txt"]);
  });
});
