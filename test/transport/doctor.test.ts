// `paseo-ssh-runtime doctor` as a spawned CLI against the real sshd (needs `npm run build`).
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { runCli } from "../support/run-cli.js";
import { rig, rigOptions, uniqueTestRoot } from "../rig/rig.js";
import { writeKeyFile } from "../rig/keys.js";
import { needs } from "../support/needs.js";

const STEP = /^(ok  |FAIL) (.{17}) +(\d+) ms {2}(.*)$/;
/** The step lines (the hop chain and config lines in between are indented). */
const steps = (out: string) => out.split("\n").filter((l) => STEP.test(l));

describe("doctor", () => {
  const s = suite();

  it("passes every step against the rig, installing the agent first time and finding it next", async () => {
    const options = JSON.stringify(rigOptions({ root: uniqueTestRoot("doctor") }));
    const first = await runCli(["doctor", "--options", options]);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    const lines = steps(first.stdout.toString());
    expect(lines.map((l) => STEP.exec(l)?.[2]?.trim())).toEqual([
      "ssh_config",
      "connect",
      "host key verified",
      "authenticated",
      "agent",
      "host facts",
      "terminals",
      "forwarded ports",
    ]);
    expect(lines.every((l) => l.startsWith("ok  "))).toBe(true);
    expect(lines[2]).toMatch(/SHA256:[A-Za-z0-9+/]{43} \(known_hosts .* line \d+\)/);
    expect(lines[4]).toMatch(/installed agent [0-9a-f]{16} in /);
    expect(lines[5]).toMatch(/node v\d+.*git version .* GiB free under \//);
    // The way this host (this machine) gives PTY execs a terminal: python3, else util-linux script, else sshd's pty.
    const terminal =
      needs.hostCommand("python3", "relay") === null
        ? /owned by the host daemon via python 3\.\d+\.\d+ \(\/\S+\)/
        : needs.utilLinuxScript() === null
          ? /owned by the host daemon via util-linux script \(.+\)/
          : /sshd's pty, one SSH channel per terminal that ends with it \(no python3; no script\)/;
    expect(lines[6]).toMatch(new RegExp(` terminals +\\d+ ms {2}${terminal.source}$`));
    // OpenSSH forwards TCP by default (the embedded server's answer is its own).
    if (rig().server === "openssh")
      expect(lines[7]).toMatch(/ forwarded ports +\d+ ms {2}detected and forwarded to this machine's loopback$/);

    const dir = s.tmp(join(rig().tmpDir, "doctor-"));
    writeFileSync(join(dir, "options.json"), options);
    const second = await runCli(["doctor", "--options-file", join(dir, "options.json")]);
    expect(second.code).toBe(0);
    const hash = (l: string | undefined) => /agent ([0-9a-f]{16}) in /.exec(l ?? "")?.[1];
    const again = steps(second.stdout.toString())[4];
    // A concurrent `npm run build` between the two runs legitimately changes the hash.
    if (hash(again) === hash(lines[4])) expect(again).toMatch(/found agent [0-9a-f]{16} in /);
    else expect(again).toMatch(/installed agent [0-9a-f]{16} in /);
  });

  it("fails at the host-key step with exit code 4 against a wrong known_hosts", async () => {
    const dir = s.tmp(join(rig().tmpDir, "doctor-"));
    writeFileSync(join(dir, "known_hosts"), "");
    const result = await runCli(["doctor", "--options", JSON.stringify(rigOptions({ knownHostsFile: join(dir, "known_hosts") }))]);
    expect(result.code).toBe(4);
    const lines = steps(result.stdout.toString());
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatch(/^ok {3}connect/);
    expect(lines[2]).toMatch(/^FAIL host key verified +\d+ ms {2}\[host-key\]$/);
    expect(result.stderr).toMatch(/^Unknown host key for .* SHA256:/);
    expect(result.stderr.trimEnd().split("\n")).toHaveLength(1);
  });

  it("fails at connect with the network exit code for a closed port", async () => {
    const result = await runCli(["doctor", "--options", JSON.stringify(rigOptions({ port: 1 }))]);
    expect(result.code).toBe(5);
    expect(steps(result.stdout.toString()).slice(1)).toEqual([expect.stringMatching(/^FAIL connect +\d+ ms {2}\[network\]$/)]);
    expect(result.stderr).toContain(`${rig().host}:1`);
  });

  it("fails at authenticated with the auth exit code for an unauthorized key", async () => {
    const dir = s.tmp(join(rig().tmpDir, "doctor-"));
    writeKeyFile(join(dir, "stranger"));
    const env = { ...process.env };
    delete env.SSH_AUTH_SOCK;
    const result = await runCli(["doctor", "--options", JSON.stringify(rigOptions({ identityFile: join(dir, "stranger") }))], { env });
    expect(result.code).toBe(3);
    const lines = steps(result.stdout.toString());
    expect(lines.map((l) => l.slice(0, 22).trim())).toEqual([
      "ok   ssh_config",
      "ok   connect",
      "ok   host key verified",
      "FAIL authenticated",
    ]);
    expect(result.stderr).toMatch(/^SSH authentication failed for /);
  });

  it("rejects bad options with the input exit code and names the key", async () => {
    const result = await runCli(["doctor", "--options", JSON.stringify({ host: "h", prot: 22 })]);
    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toBe('Unknown runtime option "prot"');
  });
});
