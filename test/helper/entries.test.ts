// Entry mutations (docs/contract.md#helper-commands): JSON results with exit 0, exact error
// texts, confinement of every created, renamed, copied and deleted path.
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ensureHelperBuilt, makeFixture, runHardError, runJson, type Fixture } from "../support/helper.js";

let fx: Fixture;
let cwd: { cwd: string };
const run = (args: string[]) => runJson(args, cwd);
const ok = (path: string) => ({ protocolVersion: 1, status: "ok", path });
const error = (message: string) => ({ protocolVersion: 1, status: "error", error: message });

beforeAll(() => ensureHelperBuilt());
beforeEach(() => {
  fx = makeFixture();
  cwd = { cwd: fx.workspace };
});
afterEach(() => fx.cleanup());

describe("entry mutations, in sequence", () => {
  it("creates, renames, duplicates and deletes inside docs", async () => {
    expect(await run(["fs-create-entry", "--name", "docs", "--kind", "directory"])).toEqual(ok("docs"));
    expect(await run(["fs-create-entry", "--parent-path", "docs", "--name", "note.txt", "--kind", "file"])).toEqual(ok("docs/note.txt"));
    expect(statSync(fx.path("docs", "note.txt")).size).toBe(0);
    writeFileSync(fx.path("docs", "note.txt"), "content\n");
    expect(await run(["fs-rename-entry", "--path", "docs/note.txt", "--name", "notes.txt"])).toEqual(ok("docs/notes.txt"));
    expect(await run(["fs-duplicate-entry", "--path", "docs/notes.txt"])).toEqual(ok("docs/notes copy.txt"));
    expect(readFileSync(fx.path("docs", "notes copy.txt"), "utf8")).toBe("content\n");
    expect(await run(["fs-delete-entry", "--path", "docs/notes.txt"])).toEqual(ok("docs/notes.txt"));
    expect(readdirSync(fx.path("docs"))).toEqual(["notes copy.txt"]);
  });

  it("refuses to create under a parent symlinked outside, creating nothing", async () => {
    mkdirSync(fx.path("..", "outside-dir"));
    symlinkSync("../outside-dir", fx.path("outside-link"));
    expect(await run(["fs-create-entry", "--parent-path", "outside-link", "--name", "escaped.txt", "--kind", "file"])).toEqual(
      error("Access outside of workspace is not allowed"),
    );
    expect(readdirSync(fx.path("..", "outside-dir"))).toEqual([]);
  });
});

describe("fs-create-entry", () => {
  it("validates the trimmed name, then the kind", async () => {
    for (const name of ["", "   ", ".", ".."]) {
      expect(await run(["fs-create-entry", "--name", name, "--kind", "file"])).toEqual(error("Invalid name"));
    }
    expect(await run(["fs-create-entry", "--kind", "file"])).toEqual(error("Invalid name"));
    expect(await run(["fs-create-entry", "--name", "a/b", "--kind", "file"])).toEqual(error("Name cannot contain path separators"));
    expect(await run(["fs-create-entry", "--name", "a\\b", "--kind", "bogus"])).toEqual(error("Name cannot contain path separators"));
    expect(await run(["fs-create-entry", "--name", "a", "--kind", "bogus"])).toEqual(error("Invalid entry kind"));
    expect(await run(["fs-create-entry", "--name", "  spaced.txt  ", "--kind", "file"])).toEqual(ok("spaced.txt"));
    expect(statSync(fx.path("spaced.txt")).mode & 0o777).toBe(0o644 & ~process.umask());
  });

  it("maps existing entries, file parents and missing parents", async () => {
    writeFileSync(fx.path("taken.txt"), "keep");
    expect(await run(["fs-create-entry", "--name", "taken.txt", "--kind", "file"])).toEqual(error('"taken.txt" already exists'));
    expect(await run(["fs-create-entry", "--name", "taken.txt", "--kind", "directory"])).toEqual(error('"taken.txt" already exists'));
    expect(readFileSync(fx.path("taken.txt"), "utf8")).toBe("keep");
    expect(await run(["fs-create-entry", "--parent-path", "taken.txt", "--name", "x", "--kind", "file"])).toEqual(
      error("Parent path is not a directory"),
    );
    expect(await run(["fs-create-entry", "--parent-path", "gone", "--name", "x", "--kind", "file"])).toEqual(
      error("File or folder no longer exists"),
    );
    expect(await run(["fs-create-entry", "--parent-path", "../", "--name", "x", "--kind", "file"])).toEqual(
      error("Access outside of workspace is not allowed"),
    );
  });
});

describe("fs-rename-entry", () => {
  it("renames within the same directory only and refuses clashes and the root", async () => {
    mkdirSync(fx.path("dir"));
    writeFileSync(fx.path("dir", "a.txt"), "a");
    writeFileSync(fx.path("dir", "b.txt"), "b");
    expect(await run(["fs-rename-entry", "--path", "dir/a.txt", "--name", "b.txt"])).toEqual(error('"b.txt" already exists'));
    expect(await run(["fs-rename-entry", "--path", "dir/a.txt", "--name", "a.txt"])).toEqual(ok("dir/a.txt"));
    expect(await run(["fs-rename-entry", "--path", ".", "--name", "x"])).toEqual(error("Cannot rename the workspace root"));
    expect(await run(["fs-rename-entry", "--path", "dir/nope", "--name", "x"])).toEqual(error("File or folder no longer exists"));
    expect(await run(["fs-rename-entry", "--path", "dir/a.txt", "--name", "../x"])).toEqual(error("Name cannot contain path separators"));
    expect(await run(["fs-rename-entry", "--path", "dir", "--name", "renamed"])).toEqual(ok("renamed"));
    expect(readdirSync(fx.path("renamed")).sort()).toEqual(["a.txt", "b.txt"]);
  });

  it("renames a symlink itself, not its target", async () => {
    writeFileSync(fx.path("target.txt"), "t");
    symlinkSync("target.txt", fx.path("link"));
    expect(await run(["fs-rename-entry", "--path", "link", "--name", "link2"])).toEqual(ok("link2"));
    expect(lstatSync(fx.path("link2")).isSymbolicLink()).toBe(true);
    expect(readdirSync(fx.workspace).sort()).toEqual(["link2", "target.txt"]);
  });
});

describe("fs-duplicate-entry", () => {
  it("numbers copies, keeps extensions for files only and copies trees with timestamps", async () => {
    mkdirSync(fx.path("docs", "deep"), { recursive: true });
    writeFileSync(fx.path("docs", "notes.txt"), "n");
    writeFileSync(fx.path("docs", "deep", "x.md"), "deep");
    writeFileSync(fx.path(".bashrc"), "rc");
    const old = new Date(Date.UTC(2020, 1, 2, 3, 4, 5));
    utimesSync(fx.path("docs", "notes.txt"), old, old);
    expect(await run(["fs-duplicate-entry", "--path", "docs/notes.txt"])).toEqual(ok("docs/notes copy.txt"));
    expect(await run(["fs-duplicate-entry", "--path", "docs/notes.txt"])).toEqual(ok("docs/notes copy 2.txt"));
    expect(statSync(fx.path("docs", "notes copy 2.txt")).mtime.toISOString()).toBe(old.toISOString());
    expect(await run(["fs-duplicate-entry", "--path", ".bashrc"])).toEqual(ok(".bashrc copy"));
    expect(await run(["fs-duplicate-entry", "--path", "docs"])).toEqual(ok("docs copy"));
    expect(readFileSync(fx.path("docs copy", "deep", "x.md"), "utf8")).toBe("deep");
    expect(await run(["fs-duplicate-entry", "--path", "."])).toEqual(error("Cannot duplicate the workspace root"));
    expect(await run(["fs-duplicate-entry", "--path", "nope.txt"])).toEqual(error("File or folder no longer exists"));
  });

  it("copies symlinks inside a duplicated tree verbatim", async () => {
    mkdirSync(fx.path("tree"));
    writeFileSync(fx.path("tree", "real.txt"), "r");
    symlinkSync("real.txt", fx.path("tree", "link.txt"));
    expect(await run(["fs-duplicate-entry", "--path", "tree"])).toEqual(ok("tree copy"));
    expect(readlinkSync(fx.path("tree copy", "link.txt"))).toBe("real.txt");
  });
});

describe("fs-delete-entry", () => {
  it("deletes files and whole directories, never the root or anything outside", async () => {
    mkdirSync(fx.path("tree", "sub"), { recursive: true });
    writeFileSync(fx.path("tree", "sub", "f"), "f");
    writeFileSync(fx.path("..", "outside.txt"), "o");
    symlinkSync("../outside.txt", fx.path("escape.txt"));
    expect(await run(["fs-delete-entry", "--path", "./tree/"])).toEqual(ok("tree"));
    expect(readdirSync(fx.workspace)).toEqual(["escape.txt"]);
    expect(await run(["fs-delete-entry", "--path", "."])).toEqual(error("Cannot delete the workspace root"));
    expect(await run(["fs-delete-entry", "--path", "tree"])).toEqual(error("File or folder no longer exists"));
    expect(await run(["fs-delete-entry", "--path", "../outside.txt"])).toEqual(error("Access outside of workspace is not allowed"));
    expect(await run(["fs-delete-entry", "--path", "escape.txt"])).toEqual(error("Access outside of workspace is not allowed"));
    expect(readFileSync(fx.path("..", "outside.txt"), "utf8")).toBe("o");
  });

  it("still fails hard only for argument errors", async () => {
    expect(await runHardError(["fs-delete-entry", "--path", "a", "--name", "b"], cwd)).toBe("Unknown workspace-helper argument: --name");
  });
});
