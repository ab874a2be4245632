// Which server the rig starts: sshd where it is installed, the embedded server where it is not
// (a machine without openssh-server), either when asked, and never a silent fallback when CI
// requires sshd.
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { rig } from "./rig.js";
import { chooseServer } from "./server-choice.js";
import { needs, unless } from "../support/needs.js";

const dir = suite("all").tmp("paseo-sshd-choice-");
const fakeSshd = join(dir, "sshd");
writeFileSync(fakeSshd, "#!/bin/sh\n");
chmodSync(fakeSshd, 0o755);
const missing = join(dir, "no-sshd-here");

describe("the rig's SSH server", () => {
  it("is OpenSSH's sshd when it is installed", () => {
    expect(chooseServer(undefined, fakeSshd)).toEqual({ server: "openssh", because: `${fakeSshd} is installed` });
    expect(chooseServer("", fakeSshd).server).toBe("openssh");
  });

  it("is the embedded server on a machine without sshd", () => {
    expect(chooseServer(undefined, missing)).toEqual({ server: "embedded", because: `no ${missing}` });
  });

  it("is not a file that cannot be executed", () => {
    const plain = join(dir, "not-executable");
    writeFileSync(plain, "");
    chmodSync(plain, 0o644);
    // root may execute a file only if some execute bit is set, like everyone else.
    expect(chooseServer(undefined, plain).server).toBe("embedded");
  });

  it("is the embedded server when PASEO_TEST_SERVER=embedded, even with sshd installed", () => {
    expect(chooseServer("embedded", fakeSshd)).toEqual({ server: "embedded", because: "PASEO_TEST_SERVER=embedded" });
  });

  it("PASEO_TEST_SERVER=openssh fails instead of falling back when sshd is missing", () => {
    expect(() => chooseServer("openssh", missing)).toThrow(
      `PASEO_TEST_SERVER=openssh requires ${missing}, which is missing: apt-get install openssh-server`,
    );
    expect(chooseServer("openssh", fakeSshd).server).toBe("openssh");
  });

  it("refuses an unknown PASEO_TEST_SERVER value", () => {
    expect(() => chooseServer("dropbear", fakeSshd)).toThrow(
      'PASEO_TEST_SERVER must be "openssh" or "embedded" (or unset), not "dropbear"',
    );
  });

  it("the running rig is the one chosen for this machine and environment", unless(needs.localHost("the rig chose no server")), () => {
    expect(rig().server).toBe(chooseServer(process.env.PASEO_TEST_SERVER).server);
  });
});
