// The schema combinators every wire message is declared with (src/shared/guards.ts): one
// declaration gives the type (checked here at compile time) and the runtime check, and a refused
// value names its first failing field in declaration order.
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  allOf,
  failure,
  isInteger,
  isString,
  literal,
  object,
  optional,
  parse,
  refine,
  variant,
  withMessage,
  type Infer,
} from "../../src/shared/guards.js";
import {
  CreateRequest,
  ExecAttachRequest,
  ExecRunRequest,
  ExecSignalRequest,
  LfsSpec,
  SourceSpec,
  SubmoduleList,
  type SubmoduleOrigin,
  WorkspaceTarget,
  type DirectorySourceSpec,
} from "../../src/shared/agent-api.js";
import { RuntimeError, fromWireError, toWireError } from "../../src/shared/errors.js";
import { isDiskReport, ranOutOfSpace, requireSpace } from "../../src/shared/disk-space.js";
import { gitFailure } from "../../src/shared/git-exec.js";

const Point = object({
  x: withMessage(isInteger, "x is not an integer"),
  y: withMessage(isInteger, "y is not an integer"),
  label: optional(withMessage(isString, "label is not a string")),
});
type Point = Infer<typeof Point>;

const Shape = variant("kind", {
  dot: object({ kind: literal("dot"), at: Point }),
  text: object({ kind: literal("text"), body: isString }),
});

describe("schemas", () => {
  it("infer their type: optional fields are optional keys, variants a union", () => {
    expectTypeOf<Point>().toEqualTypeOf<{ x: number; y: number; label?: string }>();
    expectTypeOf<Infer<typeof Shape>>().toEqualTypeOf<{ kind: "dot"; at: Point } | { kind: "text"; body: string }>();
    expectTypeOf<ExecAttachRequest>().toEqualTypeOf<{ token: string; received: number; gen: number }>();
  });

  it("check at runtime what the type says", () => {
    expect(Point({ x: 1, y: 2 })).toBe(true);
    expect(Point({ x: 1, y: 2, label: "a" })).toBe(true);
    expect(Point({ x: 1, y: 2, label: 3 })).toBe(false);
    expect(Point({ x: 1 })).toBe(false);
    expect(Shape({ kind: "dot", at: { x: 1, y: 1 } })).toBe(true);
    expect(Shape({ kind: "text", body: 1 })).toBe(false);
    expect(Shape({ kind: "toString", body: "a" })).toBe(false);
    expect(Shape([])).toBe(false);
  });

  it("a refused value names its first failing field, nested ones and variants included", () => {
    expect(failure(Point, { x: 1, y: 2 })).toBeNull();
    expect(failure(Point, { x: "1", y: "2" })).toBe("x is not an integer");
    expect(failure(Point, { x: 1, y: 2, label: 7 })).toBe("label is not a string");
    expect(failure(Shape, { kind: "dot", at: { x: 1, y: null } })).toBe("y is not an integer");
    expect(failure(Shape, { kind: "text", body: 1 })).toBeUndefined();
    expect(() => parse(Point, { x: 1 }, (why) => new Error(why))).toThrow("y is not an integer");
  });

  it("a rule across fields is checked after the fields; both halves of allOf in order", () => {
    const Ordered = withMessage(
      refine(Point, (p) => p.x < p.y),
      "x must be below y",
    );
    const Both = allOf(Ordered, object({ z: withMessage(isInteger, "z is not an integer") }));
    expectTypeOf<Infer<typeof Both>>().toEqualTypeOf<{ x: number; y: number; label?: string; z: number }>();
    expect(failure(Both, { x: 1, y: 2, z: 3 })).toBeNull();
    expect(failure(Both, { x: 2, y: "1", z: "3" })).toBe("y is not an integer");
    expect(failure(Both, { x: 2, y: 1, z: "3" })).toBe("x must be below y");
    expect(failure(Both, { x: 1, y: 2, z: "3" })).toBe("z is not an integer");
    expect(failure(Both, "no")).toBe("x must be below y");
  });

  it("the one-shot requests keep the agent's lines, first failing field first", () => {
    expectTypeOf<WorkspaceTarget>().toEqualTypeOf<{ workspaceId: string; owner: string }>();
    expectTypeOf<CreateRequest["source"]>().toEqualTypeOf<SourceSpec>();
    expectTypeOf<DirectorySourceSpec["submodules"]>().toEqualTypeOf<
      | {
          key: string;
          name: string;
          path: string;
          parent: number;
          commit: string;
          url: string;
          shallow: string[];
          lfs?: LfsSpec;
          origin?: SubmoduleOrigin;
        }[]
      | undefined
    >();
    expect(failure(WorkspaceTarget, { workspaceId: "", owner: "o" })).toBeNull();
    expect(failure(WorkspaceTarget, { owner: "" })).toBe("agent request field workspaceId must be a string");
    expect(failure(WorkspaceTarget, { workspaceId: "w", owner: "" })).toBe("agent request field owner must be a non-empty string");
    const sha = "a".repeat(40);
    const dir = { kind: "directory", projectKey: "ab".repeat(16), commit: sha, branch: "", subdirectory: "" };
    expect(failure(SourceSpec, dir)).toBeNull();
    expect(failure(SourceSpec, { ...dir, kind: "svn" })).toBe("agent request has an unknown source kind");
    expect(failure(SourceSpec, { ...dir, projectKey: "zz", commit: 5 })).toBe("agent request field commit must be a non-empty string");
    expect(failure(SourceSpec, { ...dir, projectKey: "zz", branch: 1 })).toBe("malformed directory source in agent request");
    expect(failure(SourceSpec, { ...dir, shallow: ["x"], branch: 1 })).toBe("malformed submodule list in agent request");
    expect(failure(SourceSpec, { ...dir, branch: 1 })).toBe("agent request field branch must be a string");
    expect(failure(SourceSpec, { kind: "git", url: "u", revision: "", newBranch: 2, subdirectory: "" })).toBe(
      "agent request field newBranch must be a string",
    );
    const mod = { key: "c".repeat(32), name: "m", path: "m", parent: -1, commit: sha, url: "u", shallow: [] };
    expect(failure(SubmoduleList, [mod, { ...mod, parent: 0 }])).toBeNull();
    expect(failure(SubmoduleList, [{ ...mod, parent: 0 }])).toBe("malformed submodule list in agent request");
    const lfs = { pointers: [{ path: "p", oid: "d".repeat(64), size: 0, local: true }], endpoint: null };
    expect(failure(LfsSpec, lfs)).toBeNull();
    expect(failure(LfsSpec, { ...lfs, endpoint: { key: "lfs.url", url: "-x" } })).toBe("malformed LFS pointers in agent request");
    expect(failure(LfsSpec, { pointers: lfs.pointers })).toBe("malformed LFS pointers in agent request");
    const signal = { signal: "SIGTERM", workspaceId: "w", execId: "e", owner: "" };
    expect(failure(ExecSignalRequest, signal)).toBeNull();
    expect(failure(ExecSignalRequest, { ...signal, signal: "SIGSTOP", execId: "" })).toBeUndefined();
    expect(failure(ExecSignalRequest, { ...signal, execId: "" })).toBe("signal request needs workspaceId and execId");
  });

  it("the exec request keeps its field-by-field lines, in the agent's order", () => {
    const ok = { argv: ["true"], env: {}, stdio: { kind: "pipes" }, workspaceId: "w", owner: "o", execId: "e" };
    expect(failure(ExecRunRequest, ok)).toBeNull();
    expect(failure(ExecRunRequest, { ...ok, argv: [], env: 1 })).toBe("exec request has no argv");
    expect(failure(ExecRunRequest, { ...ok, cwd: 1 })).toBe("exec request cwd must be a string");
    expect(failure(ExecRunRequest, { ...ok, stdio: { kind: "pty", rows: 0, cols: 1 } })).toBe("Invalid PTY size");
    expect(failure(ExecRunRequest, { ...ok, stdio: { kind: "tty" } })).toBe("exec request has an invalid stdio");
    expect(failure(ExecRunRequest, { ...ok, owner: "" })).toBe("exec request has no owner");
    expect(failure(ExecRunRequest, { ...ok, resume: { token: "x", graceMs: 1 } })).toBe("exec request has an invalid resume field");
  });
});

describe("failure codes", () => {
  const disk = { mount: "/", freeBytes: 10, freeFiles: null, blockSize: 4096 };

  it("name our own failures, so nothing reads their text", () => {
    expect(() => requireSpace(disk, { bytes: 1e9, files: 1 }, "the checkout")).toThrow(
      expect.objectContaining({ code: "disk-short", message: expect.stringMatching(/^Not enough disk space on the remote host/) }),
    );
    expect(ranOutOfSpace(disk, "during checkout").code).toBe("disk-ran-out");
    expect(isDiskReport(ranOutOfSpace(disk, "during checkout"))).toBe(true);
    // The same words without the code are not ours.
    expect(isDiskReport(new RuntimeError("remote", "Not enough disk space on the remote host: elsewhere"))).toBe(false);
    expect(gitFailure(["index-pack"], 1, null, "bad").code).toBe("git-failed");
  });

  it("travel with the error across the wire, and only when there is one", () => {
    const wire = toWireError(ranOutOfSpace(disk, "during checkout"));
    expect(wire.code).toBe("disk-ran-out");
    expect(fromWireError(wire)).toMatchObject({ errorClass: "remote", code: "disk-ran-out", message: wire.message });
    expect(toWireError(new RuntimeError("input", "x"))).toEqual({ errorClass: "input", message: "x" });
  });
});
