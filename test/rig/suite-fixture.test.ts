// The suite fixture (test/support/suite.ts) every test file's cleanups go through: if it stopped at
// a failing cleanup, or hid a failure, tests would leave processes and dirs behind unseen.
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { runCleanups, suite } from "../support/suite.js";

describe("suite fixture", () => {
  it("runs cleanups newest first, all of them past failures, and names every failure", async () => {
    const order: string[] = [];
    const run = runCleanups([
      () => void order.push("a"),
      () => {
        order.push("b");
        throw new Error("b broke");
      },
      async () => {
        order.push("c");
        throw new Error("c broke");
      },
      () => void order.push("d"),
    ]);
    await expect(run).rejects.toThrow(/2 cleanups failed:\n {2}1\. c broke\n {2}2\. b broke/);
    expect(order).toEqual(["d", "c", "b", "a"]);
  });

  it("a single failure is thrown as it is", async () => {
    const err = new Error("only one");
    await expect(runCleanups([() => undefined, () => Promise.reject(err)])).rejects.toBe(err);
    await expect(runCleanups([])).resolves.toBeUndefined();
  });

  const fx = suite();
  let made = "";
  it("tmp gives a fresh dir that the afterEach removes", () => {
    made = fx.tmp("paseo-suite-fixture-");
    expect(existsSync(made)).toBe(true);
  });
  it("(the dir of the test before is gone)", () => {
    expect(made).not.toBe("");
    expect(existsSync(made)).toBe(false);
  });
});
