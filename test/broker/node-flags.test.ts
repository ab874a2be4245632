// The broker's V8 flags: an unknown one makes node refuse to start, so they are given only to the
// node versions known to take them, and this node must start with them.
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { BROKER_NODE_FLAGS, maxOptKnown } from "../../src/broker/client/connect-broker.js";

describe("broker node flags", () => {
  it("this node starts with them", () => {
    const r = spawnSync(process.execPath, [...BROKER_NODE_FLAGS, "-e", "process.stdout.write('up')"], { encoding: "utf8" });
    expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({ status: 0, stdout: "up", stderr: "" });
  });

  it("--max-opt only for node 20 to 24", () => {
    expect(["v18.20.0", "v20.0.0", "v22.11.0", "v24.1.0", "v26.0.0", "garbage"].map(maxOptKnown)).toEqual([
      false,
      true,
      true,
      true,
      false,
      false,
    ]);
    expect(BROKER_NODE_FLAGS).toEqual(maxOptKnown(process.version) ? ["--max-opt=1"] : []);
  });
});
