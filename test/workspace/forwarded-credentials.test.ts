// The Paseo side's decision for forwardGitCredentials, in-process (no host): which asks reach the
// user's `git credential` (the hosts of the sealed repository's remotes, however git spells them)
// and which do not (another host, a host string a helper would read differently from the URL
// parser, a repository the seal does not name, the option off); `store`/`erase` only for the
// credential the helpers give now.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { answerCredentialAsk } from "../../src/workspace/forwarded-credentials.js";
import { sealWorkHome } from "../../src/mirror/seal.js";
import type { CredentialAttributes, GitCredentialAsk } from "../../src/shared/agent-api.js";

describe("answering the host's credential asks", () => {
  const s = suite("all");
  let base: string;
  let gitDir: string;
  const saved = process.env.XDG_STATE_HOME;
  const bind = { owner: "o".repeat(64), workspaceId: "ws-cred", commit: "c".repeat(40) };

  beforeAll(() => {
    base = s.tmp("paseo-cred-unit-");
    process.env.XDG_STATE_HOME = join(base, "state");
    s.push(() => {
      if (saved === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = saved;
    });
    const repo = join(base, "repo");
    execFileSync("git", ["init", "-q", repo]);
    execFileSync("git", ["-C", repo, "remote", "add", "origin", "https://forge.example/team/repo.git"]);
    execFileSync("git", ["-C", repo, "remote", "set-url", "--push", "origin", "https://push.example:8443/team/repo.git"]);
    execFileSync("git", ["-C", repo, "remote", "add", "ssh", "git@other.example:team/repo.git"]);
    // Answers every host (so only our check stands between an ask and the token); records stores and erases.
    const helper = join(base, "helper.sh");
    writeFileSync(helper, `#!/bin/sh\ncase "$1" in get) echo username=u; echo password=TOKEN;; *) echo "$1" >> '${base}/ops';; esac\n`, {
      mode: 0o700,
    });
    execFileSync("git", ["-C", repo, "config", "credential.helper", helper]);
    gitDir = join(repo, ".git");
  });

  const ask = (attributes: CredentialAttributes, action: GitCredentialAsk["action"] = "get", home = sealWorkHome(gitDir, bind)) =>
    answerCredentialAsk(
      { workspaceId: bind.workspaceId, owner: bind.owner, createdFrom: bind.commit, workHome: home, action, attributes },
      true,
    );

  it("answers for the hosts of the remotes' fetch and push URLs, as git spells them", async () => {
    expect(await ask({ protocol: "https", host: "forge.example" })).toEqual({ username: "u", password: "TOKEN" });
    expect(await ask({ protocol: "https", host: "FORGE.example:443" })).toEqual({ username: "u", password: "TOKEN" });
    expect(await ask({ protocol: "https", host: "push.example:8443" })).toEqual({ username: "u", password: "TOKEN" });
  });

  it("refuses every other host, and host strings a helper would read otherwise", async () => {
    for (const [protocol, host] of [
      ["https", "evil.example"],
      ["http", "forge.example"],
      ["https", "push.example"],
      ["https", "other.example"],
      ["https", "forge.example@evil.example"],
      ["https", "evil.example/forge.example"],
      ["https", "forge.example/x"],
      ["https", "forge.example#x"],
    ] as const) {
      const a = await ask({ protocol, host });
      expect(a.password, `${protocol}://${host}`).toBeUndefined();
      expect(a.refused).toMatch(/is not the host of a remote/);
    }
  });

  it("refuses a repository the seal does not name, and everything with the option off", async () => {
    const other = { gitDir: join(base, "elsewhere", ".git"), seal: sealWorkHome(gitDir, bind).seal };
    expect((await ask({ protocol: "https", host: "forge.example" }, "get", other)).refused).toMatch(/not sealed by this machine/);
    const off = await answerCredentialAsk(
      {
        workspaceId: bind.workspaceId,
        owner: bind.owner,
        createdFrom: bind.commit,
        workHome: sealWorkHome(gitDir, bind),
        action: "get",
        attributes: { protocol: "https", host: "forge.example" },
      },
      false,
    );
    expect(off).toEqual({ refused: "forwardGitCredentials is off for this host" });
  });

  it("relays store and erase only for the credential the helpers give now", async () => {
    const given = { protocol: "https", host: "forge.example", username: "u" };
    expect(await ask({ ...given, password: "planted" }, "store")).toEqual({ refused: expect.stringMatching(/not the credential/) });
    expect(await ask({ ...given, password: "planted" }, "erase")).toEqual({ refused: expect.stringMatching(/not the credential/) });
    expect(await ask({ ...given, password: "TOKEN" }, "store")).toEqual({});
    expect(await ask({ ...given, password: "TOKEN" }, "erase")).toEqual({});
    expect(execFileSync("cat", [join(base, "ops")], { encoding: "utf8" })).toBe("store\nerase\n");
  });
});
