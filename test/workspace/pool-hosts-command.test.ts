// The README's `hostsCommand` examples (a Kubernetes and a cloud fleet) are what the code accepts:
// each is taken from README.md as written, run by the runtime's own hostsCommand code with `kubectl`
// and `aws` stand-ins on PATH printing the fleet engines' JSON, and its answer parsed as host entries.
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { loadHostList } from "../../src/workspace/pool/hosts-command.js";
import { parseEntries, parsePoolSpec } from "../../src/workspace/pool/pool-options.js";
import { needs, unless } from "../support/needs.js";

const README = readFileSync(new URL("../../README.md", import.meta.url), "utf8");

/** Every `"hostsCommand": …` JSON block of the README, parsed. */
function readmeExamples(): unknown[] {
  return [...README.matchAll(/```json\n"hostsCommand": (.*)\n```/g)].map((m) => JSON.parse(m[1]!) as unknown);
}

const PODS = {
  kind: "List",
  items: [
    { metadata: { name: "buildbox-0", labels: { app: "buildbox" } }, status: { phase: "Running", podIP: "10.1.0.5" } },
    { metadata: { name: "buildbox-1", labels: { app: "buildbox", cordoned: "true" } }, status: { phase: "Running", podIP: "10.1.0.6" } },
    { metadata: { name: "buildbox-2", labels: { app: "buildbox" } }, status: { phase: "Pending" } },
  ],
};
const INSTANCES = {
  Reservations: [
    { Instances: [{ InstanceId: "i-1", PrivateIpAddress: "10.0.1.10" }] },
    { Instances: [{ InstanceId: "i-2", PrivateIpAddress: "10.0.1.11" }] },
  ],
};

describe("README hostsCommand examples", unless(needs.command("jq", "the examples filter the fleet's JSON with jq")), () => {
  const s = suite("all");
  let bin: string;
  let path: string | undefined;
  beforeAll(() => {
    bin = s.tmp("paseo-fleet-");
    for (const [name, answer] of [
      ["kubectl", PODS],
      ["aws", INSTANCES],
    ] as const) {
      writeFileSync(join(bin, `${name}.json`), JSON.stringify(answer));
      writeFileSync(join(bin, name), `#!/bin/sh\ncat '${join(bin, `${name}.json`)}'\n`);
      chmodSync(join(bin, name), 0o755);
    }
    path = process.env.PATH;
    process.env.PATH = `${bin}:${path}`;
    s.push(() => {
      process.env.PATH = path;
    });
  });

  it("lists a Kubernetes and a cloud fleet example", () => {
    const argv = readmeExamples().map((e) => JSON.stringify(e));
    expect(argv).toHaveLength(2);
    expect(argv[0]).toContain("kubectl get pods");
    expect(argv[1]).toContain("aws ec2 describe-instances");
  });

  it("the Kubernetes example lists the running pods, cordoned by label", async () => {
    const spec = parsePoolSpec({ user: "paseo", hostsCommand: readmeExamples()[0] });
    const entries = parseEntries(spec.defaults, await loadHostList({ ...spec.hostsCommand!, cacheMs: 0 }), "hostsCommand output");
    expect(entries.map((e) => [e.options.host, e.cordoned])).toEqual([
      ["10.1.0.5", false],
      ["10.1.0.6", true],
    ]);
  });

  it("the cloud example lists every running instance by its private address", async () => {
    const spec = parsePoolSpec({ user: "paseo", hostsCommand: readmeExamples()[1] });
    const entries = parseEntries(spec.defaults, await loadHostList({ ...spec.hostsCommand!, cacheMs: 0 }), "hostsCommand output");
    expect(entries.map((e) => e.options.host)).toEqual(["10.0.1.10", "10.0.1.11"]);
    expect(spec.hostsCommand).toMatchObject({ timeoutMs: 20_000, cacheMs: 30_000 });
  });
});
