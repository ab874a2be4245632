// The schema combinators every wire message is declared with (src/shared/guards.ts): one
// declaration gives the type (checked here at compile time) and the runtime check, and a refused
// value names its first failing field in declaration order.
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  failure,
  isInteger,
  isString,
  literal,
  object,
  optional,
  parse,
  variant,
  withMessage,
  type Infer,
} from "../../src/shared/guards.js";
import { ExecAttachRequest, ExecRunRequest } from "../../src/shared/agent-api.js";
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
