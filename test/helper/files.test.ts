// One-shot file commands against the built helper (docs/contract.md#helper-protocol: stat, list,
// read and write cases). Every run uses env {} (no PATH), as Paseo does.
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  collect,
  ensureHelperBuilt,
  makeFixture,
  runHardError,
  runHelper,
  runJson,
  sleep,
  startHelper,
  type Fixture,
} from "../support/helper.js";

const OUTSIDE = "Access outside of workspace is not allowed";
let fx: Fixture;
let cwd: { cwd: string };

beforeAll(() => ensureHelperBuilt());
beforeEach(() => {
  fx = makeFixture();
  cwd = { cwd: fx.workspace };
  writeFileSync(fx.path("committed.txt"), "0123456789");
  writeFileSync(fx.path("notes.txt"), "before\n");
  writeFileSync(fx.path("..", "outside.txt"), "outside\n");
  symlinkSync("../outside.txt", fx.path("escape.txt"));
});
afterEach(() => fx.cleanup());

// Truncated to the millisecond like the helper (a plain stat's Date rounds instead).
function mtimeIso(path: string): string {
  return statSync(path, { bigint: true }).mtime.toISOString();
}

function revisionOf(path: string): string {
  const s = statSync(path, { bigint: true });
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}`;
}

/** The fs-stat `ready` answer (without protocolVersion) for a text file, from the disk's view. */
function readyText(name: string, size: number): object {
  const path = fx.path(name);
  return {
    status: "ready",
    path: name,
    kind: "text",
    encoding: "utf-8",
    mimeType: "text/plain",
    size,
    modifiedAt: mtimeIso(path),
    revision: revisionOf(path),
  };
}

describe("fs-stat", () => {
  it("reports a 10-byte committed.txt as ready text with exact keys in order", async () => {
    const result = await runJson(["fs-stat", "--path", "committed.txt"], cwd);
    expect(Object.keys(result)).toEqual([
      "protocolVersion",
      "status",
      "path",
      "kind",
      "encoding",
      "mimeType",
      "size",
      "modifiedAt",
      "revision",
    ]);
    expect(result).toEqual({ protocolVersion: 1, ...readyText("committed.txt", 10) });
  });

  it("normalises the path of a ready file and echoes raw paths otherwise", async () => {
    mkdirSync(fx.path("a"));
    expect((await runJson(["fs-stat", "--path", "./a/../notes.txt"], cwd)).path).toBe("notes.txt");
    expect(await runJson(["fs-stat", "--path", "./missing.txt"], cwd)).toEqual({
      protocolVersion: 1,
      status: "missing",
      path: "./missing.txt",
    });
    expect(await runJson(["fs-stat", "--path", "nodir/x.txt"], cwd)).toEqual({
      protocolVersion: 1,
      status: "missing",
      path: "nodir/x.txt",
    });
    expect(await runJson(["fs-stat", "--path", "notes.txt/x"], cwd)).toEqual({
      protocolVersion: 1,
      status: "missing",
      path: "notes.txt/x",
    });
  });

  it("refuses absolute, lexical and symlink escapes with the exact message", async () => {
    for (const path of ["/etc/passwd", "../outside.txt", "escape.txt", "..foo", "a/../../outside.txt"]) {
      expect(await runJson(["fs-stat", "--path", path], cwd)).toEqual({ protocolVersion: 1, status: "error", path, error: OUTSIDE });
    }
  });

  it("reports directories as not a file, with the normalised path", async () => {
    expect(await runJson(["fs-stat"], cwd)).toEqual({
      protocolVersion: 1,
      status: "error",
      path: ".",
      error: "Requested path is not a file",
    });
    mkdirSync(fx.path("dir"));
    expect(await runJson(["fs-stat", "--path", "./dir/"], cwd)).toMatchObject({ status: "error", path: "dir" });
  });

  it("reports a dangling symlink as missing", async () => {
    symlinkSync("nowhere", fx.path("dangling"));
    expect(await runJson(["fs-stat", "--path", "dangling"], cwd)).toEqual({ protocolVersion: 1, status: "missing", path: "dangling" });
  });

  it("classifies images by extension, binaries by content and text otherwise", async () => {
    const files: Array<[string, Buffer | string, object]> = [
      ["img.PNG", "not really a png", { kind: "image", encoding: "binary", mimeType: "image/png" }],
      ["photo.jpeg", "x", { kind: "image", encoding: "binary", mimeType: "image/jpeg" }],
      ["logo.svg", "<svg/>", { kind: "image", encoding: "binary", mimeType: "image/svg+xml" }],
      ["data.json", '{"a":1}', { kind: "text", encoding: "utf-8", mimeType: "application/json" }],
      ["empty.bin", "", { kind: "text", encoding: "utf-8", mimeType: "text/plain" }],
      ["nul.txt", Buffer.from([0x61, 0x00, 0x62]), { kind: "binary", encoding: "binary", mimeType: "application/octet-stream" }],
      ["latin1.txt", Buffer.from([0x63, 0x61, 0x66, 0xe9]), { kind: "binary", encoding: "binary", mimeType: "application/octet-stream" }],
      ["controls.txt", Buffer.from([1, 2, 3, 4, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66]), { kind: "binary" }],
      ["few-controls.txt", Buffer.from([1, 2, 3, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67]), { kind: "text" }],
      ["bom.txt", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("héllo\n")]), { kind: "text" }],
      ["straddle.txt", `${"a".repeat(8191)}é`, { kind: "binary" }],
      ["fits.txt", `${"a".repeat(8190)}é`, { kind: "text" }],
      ["tabs.txt", "\t\t\t\r\n\r\n", { kind: "text" }],
    ];
    for (const [name, contents, expected] of files) {
      writeFileSync(fx.path(name), contents);
      expect({ name, ...(await runJson(["fs-stat", "--path", name], cwd)) }).toMatchObject({ name, status: "ready", ...expected });
    }
  });
});

describe("fs-list", () => {
  it("lists entries newest first, name ties by localeCompare, skipping escaping and dangling links", async () => {
    mkdirSync(fx.path("sub"));
    writeFileSync(fx.path("sub", "inner.txt"), "hi");
    writeFileSync(fx.path(".hidden"), "h");
    writeFileSync(fx.path("b.txt"), "b");
    writeFileSync(fx.path("a.txt"), "a");
    symlinkSync("nowhere", fx.path("dangling"));
    symlinkSync("/etc/passwd", fx.path("passwd-link"));
    symlinkSync("notes.txt", fx.path("inner-link"));
    const t = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
    utimesSync(fx.path("committed.txt"), t(1), t(1));
    utimesSync(fx.path("notes.txt"), t(5), t(5));
    utimesSync(fx.path("a.txt"), t(3), t(3));
    utimesSync(fx.path("b.txt"), t(3), t(3));
    utimesSync(fx.path(".hidden"), t(3), t(3));
    utimesSync(fx.path("sub"), t(2), t(2));

    const result = await runJson(["fs-list"], cwd);
    expect(result.path).toBe(".");
    const entries = result.entries as Array<Record<string, unknown>>;
    expect(entries.map((e) => e.name)).toEqual(["inner-link", "notes.txt", ".hidden", "a.txt", "b.txt", "sub", "committed.txt"]);
    expect(Object.keys(entries[0] as object)).toEqual(["name", "path", "kind", "size", "modifiedAt"]);
    expect(entries.find((e) => e.name === "sub")).toEqual({
      name: "sub",
      path: "sub",
      kind: "directory",
      size: statSync(fx.path("sub")).size,
      modifiedAt: t(2).toISOString(),
    });
    expect(entries.find((e) => e.name === "inner-link")).toMatchObject({ kind: "file", size: 7, modifiedAt: t(5).toISOString() });
  });

  it("lists a sub-directory with workspace-relative entry paths", async () => {
    mkdirSync(fx.path("sub"));
    writeFileSync(fx.path("sub", "inner.txt"), "hi");
    const result = await runJson(["fs-list", "--path", "sub/"], cwd);
    expect(result).toEqual({
      protocolVersion: 1,
      path: "sub",
      entries: [{ name: "inner.txt", path: "sub/inner.txt", kind: "file", size: 2, modifiedAt: mtimeIso(fx.path("sub", "inner.txt")) }],
    });
  });

  it("fails hard for files, missing and outside paths", async () => {
    expect(await runHardError(["fs-list", "--path", "notes.txt"], cwd)).toBe("Requested path is not a directory");
    expect(await runHardError(["fs-list", "--path", "nope"], cwd)).toBe(`ENOENT: no such file or directory, stat '${fx.path("nope")}'`);
    expect(await runHardError(["fs-list", "--path", "../"], cwd)).toBe(OUTSIDE);
    expect(await runHardError(["fs-list", "--path", "/tmp"], cwd)).toBe(OUTSIDE);
  });
});

describe("fs-read", () => {
  it("streams a 700,000-byte 0xA5 file byte-exact with nothing else on stdout", async () => {
    const bytes = Buffer.alloc(700_000, 0xa5);
    writeFileSync(fx.path("large.bin"), bytes);
    const result = await runHelper(["fs-read", "--path", "large.bin"], cwd);
    expect({ code: result.code, signal: result.signal, stderr: result.stderr }).toEqual({ code: 0, signal: null, stderr: "" });
    expect(result.stdout.length).toBe(700_000);
    expect(result.stdout.equals(bytes)).toBe(true);
  });

  it("reads through an in-workspace symlink and an empty file", async () => {
    symlinkSync("notes.txt", fx.path("link.txt"));
    writeFileSync(fx.path("empty"), "");
    expect((await runHelper(["fs-read", "--path", "link.txt"], cwd)).stdout.toString()).toBe("before\n");
    const empty = await runHelper(["fs-read", "--path", "empty"], cwd);
    expect([empty.code, empty.stdout.length]).toEqual([0, 0]);
  });

  it("refuses a symlink to /etc/passwd and other escapes with the confinement message", async () => {
    symlinkSync("/etc/passwd", fx.path("passwd-link"));
    for (const path of ["passwd-link", "/etc/passwd", "../outside.txt", "escape.txt"]) {
      expect(await runHardError(["fs-read", "--path", path], cwd)).toBe(OUTSIDE);
    }
  });

  it("reports missing, dangling, directory and FIFO paths as hard errors", async () => {
    symlinkSync("nowhere", fx.path("dangling"));
    mkdirSync(fx.path("dir"));
    execFileSync("mkfifo", [fx.path("fifo")]);
    expect(await runHardError(["fs-read", "--path", "nope"], cwd)).toBe(`ENOENT: no such file or directory, open '${fx.path("nope")}'`);
    expect(await runHardError(["fs-read", "--path", "dangling"], cwd)).toBe(
      `ELOOP: too many symbolic links encountered, open '${fx.path("dangling")}'`,
    );
    expect(await runHardError(["fs-read", "--path", "dir"], cwd)).toBe("Requested path is not a file");
    expect(await runHardError(["fs-read"], cwd)).toBe("Requested path is not a file");
    expect(await runHardError(["fs-read", "--path", "fifo"], { ...cwd, timeoutMs: 5000 })).toBe("Requested path is not a file");
  });

  it("dies by SIGTERM when a partially consumed read is cancelled", async () => {
    writeFileSync(fx.path("huge.bin"), Buffer.alloc(32 * 1024 * 1024, 7));
    const child = startHelper(["fs-read", "--path", "huge.bin"], cwd);
    child.stdin.end();
    const exit = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on("close", (c, s) => resolve([c, s])));
    await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
    child.stdout.pause(); // back-pressure: the helper now waits for a drain that never comes
    child.kill("SIGTERM");
    expect(await exit).toEqual([null, "SIGTERM"]);
  });
});

describe("fs-write", () => {
  const write = (args: string[], input: string | Buffer) => runJson(["fs-write", ...args], { ...cwd, input });

  it("overwrites unconditionally and answers with the new revision", async () => {
    const initial = revisionOf(fx.path("notes.txt"));
    const result = await write(["--path", "notes.txt"], "after\n");
    expect(Object.keys(result)).toEqual(["protocolVersion", "status", "modifiedAt", "size", "revision"]);
    expect(result).toEqual({
      protocolVersion: 1,
      status: "written",
      modifiedAt: mtimeIso(fx.path("notes.txt")),
      size: 6,
      revision: revisionOf(fx.path("notes.txt")),
    });
    expect(result.revision).not.toBe(initial);
    expect(readFileSync(fx.path("notes.txt"), "utf8")).toBe("after\n");
  });

  it("writes with the current revision, then reports a conflict for the stale one", async () => {
    const initial = revisionOf(fx.path("notes.txt"));
    expect(await write(["--path", "notes.txt", "--expected-revision", initial], "after\n")).toMatchObject({ status: "written", size: 6 });
    const stale = await write(["--path", "notes.txt", "--expected-revision", initial], "again\n");
    expect(stale).toEqual({
      protocolVersion: 1,
      status: "conflict",
      version: readyText("notes.txt", 6),
    });
    expect(readFileSync(fx.path("notes.txt"), "utf8")).toBe("after\n");
  });

  it("checks --expected-modified-at only without an expected revision", async () => {
    expect(await write(["--path", "notes.txt", "--expected-modified-at", "2000-01-01T00:00:00.000Z"], "x")).toMatchObject({
      status: "conflict",
      version: { status: "ready", path: "notes.txt", size: 7 },
    });
    const revision = revisionOf(fx.path("notes.txt"));
    expect(await write(["--path", "notes.txt", "--expected-revision", revision, "--expected-modified-at", "bogus"], "y")).toMatchObject({
      status: "written",
      size: 1,
    });
    const current = mtimeIso(fx.path("notes.txt"));
    expect(await write(["--path", "notes.txt", "--expected-modified-at", current], "zz")).toMatchObject({ status: "written", size: 2 });
  });

  it("reports a conflict when the file changes while stdin is still being copied", async () => {
    const initial = revisionOf(fx.path("notes.txt"));
    const child = startHelper(["fs-write", "--path", "notes.txt", "--expected-revision", initial], cwd);
    const done = collect(child);
    child.stdin.write("partial ");
    await sleep(200); // the precondition has passed; the helper is copying stdin to its temp file
    writeFileSync(fx.path("notes.txt"), "concurrent edit\n");
    child.stdin.end("rest\n");
    const result = await done;
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout.toString())).toEqual({ protocolVersion: 1, status: "conflict", version: readyText("notes.txt", 16) });
    expect(readFileSync(fx.path("notes.txt"), "utf8")).toBe("concurrent edit\n");
    expect(readdirSync(fx.workspace).filter((n) => n.includes(".paseo-"))).toEqual([]);
  });

  it("never creates a missing file", async () => {
    expect(await write(["--path", "new.txt"], "data")).toEqual({
      protocolVersion: 1,
      status: "conflict",
      version: { status: "missing", path: "new.txt" },
    });
    expect(readdirSync(fx.workspace)).not.toContain("new.txt");
  });

  it("answers not-a-file for directories, without a path key", async () => {
    mkdirSync(fx.path("dir"));
    expect(await write(["--path", "dir"], "x")).toEqual({ protocolVersion: 1, status: "error", error: "Requested path is not a file" });
  });

  it("fails hard for escaping paths and leaves the outside untouched", async () => {
    expect(await runHardError(["fs-write", "--path", "escape.txt"], { ...cwd, input: "pwned" })).toBe(OUTSIDE);
    expect(await runHardError(["fs-write", "--path", "../outside.txt"], { ...cwd, input: "pwned" })).toBe(OUTSIDE);
    expect(readFileSync(fx.path("..", "outside.txt"), "utf8")).toBe("outside\n");
  });

  it("writes through an in-workspace symlink, keeping the link, the mode and no temp files", async () => {
    symlinkSync("notes.txt", fx.path("link.txt"));
    chmodSync(fx.path("notes.txt"), 0o640);
    expect(await write(["--path", "link.txt"], "via link\n")).toMatchObject({ status: "written", size: 9 });
    expect(lstatSync(fx.path("link.txt")).isSymbolicLink()).toBe(true);
    expect(readlinkSync(fx.path("link.txt"))).toBe("notes.txt");
    expect(readFileSync(fx.path("notes.txt"), "utf8")).toBe("via link\n");
    expect(statSync(fx.path("notes.txt")).mode & 0o777).toBe(0o640);
    expect(readdirSync(fx.workspace).filter((n) => n.includes(".paseo-"))).toEqual([]);
  });

  it("copies a 700,000-byte upload from stdin byte-exact", async () => {
    writeFileSync(fx.path("upload.bin"), "");
    const bytes = Buffer.alloc(700_000, 0xa5);
    expect(await write(["--path", "upload.bin"], bytes)).toMatchObject({ status: "written", size: 700_000 });
    expect(readFileSync(fx.path("upload.bin")).equals(bytes)).toBe(true);
  });
});
