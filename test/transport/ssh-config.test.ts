// ssh_config resolution checked against OpenSSH itself: for a set of fixture configs (Include with
// globs and a relative path, Host with negated patterns, Match host/originalhost/user/localuser/
// exec, tokens, several IdentityFiles, IdentitiesOnly), the runtime's reading (both through
// `ssh -G` and through the fallback parser) must agree with `ssh -G -F fixture alias` on every
// honoured keyword, and `%`/`~` expansion must equal what ssh makes of the same strings. Then the
// refusals, explicit options winning, and IdentitiesOnly with an agent holding other keys against
// the real sshd rig.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, rmSync, rmdirSync, readdirSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { RuntimeError } from "../../src/shared/errors.js";
import { parseRuntimeOptions } from "../../src/transport/options.js";
import { parseDump } from "../../src/transport/ssh-config/dump.js";
import { resolveHostConfig, resolvePlan } from "../../src/transport/ssh-config/resolve.js";
import type { EvalRequest } from "../../src/transport/ssh-config/ssh-g.js";
import { connectSsh } from "../../src/transport/ssh-connection.js";
import { rig, waitFor } from "../rig/rig.js";
import { writeKeyFile } from "../rig/keys.js";
import { needs, unless } from "../support/needs.js";

const hasSsh = (() => {
  try {
    execFileSync("ssh", ["-V"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

const id = randomBytes(4).toString("hex");
const s = suite("all");
const dir = s.tmp("paseo-sshcfg-");
/** Relative Include paths are relative to ~/.ssh (of the password database's home, as ssh uses). */
const homeSsh = join(userInfo().homedir, ".ssh");
const relDir = `paseo-golden-${id}`;
let homeSshCreated = false;
const fixture = join(dir, "main.conf");
const neverRan = join(dir, "should-not-run");

beforeAll(() => {
  s.push(() => {
    rmSync(join(homeSsh, relDir), { recursive: true, force: true });
    if (homeSshCreated && readdirSync(homeSsh).length === 0) rmdirSync(homeSsh);
  });
  if (!existsSync(homeSsh)) {
    mkdirSync(homeSsh, { mode: 0o700 });
    homeSshCreated = true;
  }
  mkdirSync(join(homeSsh, relDir));
  writeFileSync(
    join(homeSsh, relDir, "10-inc.conf"),
    [
      "Host inc-*",
      "  HostName included-%h",
      "  IdentityFile %d/.ssh/id_%h",
      "  Port 2022",
      "Match host included-inc-special",
      "  User special",
      "",
    ].join("\n"),
  );
  mkdirSync(join(dir, "extra"));
  writeFileSync(join(dir, "extra", "a1.conf"), "Host extra1\n  HostName 192.168.7.7\n  IdentityAgent none\n  ConnectTimeout 1m30s\n");
  writeFileSync(join(dir, "extra", "b.conf"), "Host extra2\n  ProxyJump 10.0.0.9\n  IdentityAgent ~/agent-%r.sock\n");
  // Not matched by the glob: its Port must not apply.
  writeFileSync(join(dir, "extra", "c.conf"), "Host extra1\n  Port 9999\n");
  writeFileSync(join(dir, "flag"), "");
  writeFileSync(
    fixture,
    `# golden fixture
Include ${relDir}/*.conf
Include ${dir}/extra/[ab]*.conf

Host web-* !web-internal
  HostName %h.example.net
  User deploy
  Port 2201
  IdentityFile ~/.ssh/id_%r_%h
  IdentityFile %d/keys/%n-%p
  IdentityFile ${dir}/k_%u_%i
  IdentitiesOnly yes
  UserKnownHostsFile ${dir}/kh_%h %d/kh2_%k %d/kh3_%C
  ServerAliveInterval 5

Host web-internal
  HostName 10.1.2.3
  ProxyCommand nc -X connect -x proxy:3128 %h %p
  IdentityAgent ${dir}/agent_%h.sock

Match host *.example.net user deploy
  ConnectTimeout 7
  HostKeyAlias WebKeys

Match originalhost web-2 !user deploy
  Port 2202

Match localuser ${userInfo().username} host db*
  ServerAliveInterval 9

Match exec "test -e ${dir}/flag" host db1
  Port 2299

Match host nomatch exec "touch ${neverRan}"
  Port 1

Host db*
  HostName %h.internal
  User dbadmin
  ProxyJump ops@jump.example:2222,second
  StrictHostKeyChecking accept-new

Host *
  ServerAliveCountMax 4
  GlobalKnownHostsFile ${dir}/global_kh ~/global2
`,
  );
});

const ALIASES: Array<Omit<EvalRequest, "file">> = [
  { alias: "web-1" },
  { alias: "web-2" },
  { alias: "web-2", user: "admin" },
  { alias: "web-internal" },
  { alias: "db1" },
  { alias: "db2", port: 3333 },
  { alias: "inc-special" },
  { alias: "inc-x" },
  { alias: "extra1" },
  { alias: "extra2" },
  { alias: "plain.example.org" },
];

function sshG(args: string[]): Map<string, string[]> {
  return parseDump(execFileSync("ssh", ["-G", "-F", fixture, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }));
}

function quoteAll(values: string[]): string {
  return values.map((v) => `"${v}"`).join(" ");
}

describe("ssh_config golden: the runtime agrees with ssh -G", unless(needs.command("ssh", "OpenSSH's client answers ssh -G")), () => {
  it.each(ALIASES)("$alias (user $user, port $port): both evaluators read what ssh -G prints", async (a) => {
    const req: EvalRequest = { file: fixture, ...a };
    const viaSsh = await resolveHostConfig(req, { evaluator: "ssh -G" });
    const viaParser = await resolveHostConfig(req, { evaluator: "parser" });
    // The fallback evaluation agrees with OpenSSH's on every honoured keyword.
    expect(viaParser).toEqual(viaSsh);

    const overrides = [...(a.user ? ["-o", `User=${a.user}`] : []), ...(a.port ? ["-o", `Port=${a.port}`] : [])];
    const g = sshG([...overrides, "--", a.alias]);
    const one = (k: string) => g.get(k)?.[0];
    expect(viaSsh.hostname).toBe(one("hostname"));
    expect(viaSsh.user).toBe(one("user"));
    expect(String(viaSsh.port)).toBe(one("port"));
    expect(viaSsh.identitiesOnly ? "yes" : "no").toBe(one("identitiesonly"));
    expect(viaSsh.hostKeyAlias).toBe(one("hostkeyalias"));
    expect(viaSsh.serverAliveIntervalS).toBe(Number(one("serveraliveinterval")));
    expect(viaSsh.serverAliveCountMax).toBe(Number(one("serveralivecountmax")));
    expect(viaSsh.connectTimeoutS === undefined ? "none" : String(viaSsh.connectTimeoutS)).toBe(one("connecttimeout"));
    expect(viaSsh.proxyJump).toBe(one("proxyjump"));
    expect(viaSsh.proxyCommand).toBe(one("proxycommand"));
    expect(viaSsh.userKnownHostsFiles).toEqual(one("userknownhostsfile")!.split(" "));
    expect({ true: "yes", false: "no" }[one("stricthostkeychecking")!] ?? one("stricthostkeychecking")).toBe(viaSsh.strictHostKeyChecking);
    expect(viaSsh.identityAgent ?? "SSH_AUTH_SOCK").toBe(one("identityagent") ?? "SSH_AUTH_SOCK");

    // ssh -G prints IdentityFile and GlobalKnownHostsFile unexpanded; ssh expands UserKnownHostsFile
    // with the same tokens, `~` and ${VAR}, so it expands our strings for us there.
    const expandedBySsh = (values: string[]) =>
      sshG([...overrides, "-o", `UserKnownHostsFile=${quoteAll(values)}`, "--", a.alias])
        .get("userknownhostsfile")![0]!
        .split(" ");
    expect(viaSsh.identityFiles).toEqual(expandedBySsh(g.get("identityfile")!));
    expect(viaSsh.globalKnownHostsFiles).toEqual(expandedBySsh(one("globalknownhostsfile")!.split(" ")));
  });

  it("runs Match exec only where OpenSSH would (not after a failed criterion), in both evaluators", async () => {
    for (const evaluator of ["ssh -G", "parser"] as const) {
      const c = await resolveHostConfig({ file: fixture, alias: "db1" }, { evaluator });
      expect(c.port).toBe(2299);
      // "Match host nomatch exec …": the host criterion fails first, so the command never runs.
      expect((await resolveHostConfig({ file: fixture, alias: "other" }, { evaluator })).port).toBe(22);
    }
    expect(existsSync(neverRan)).toBe(false);
  });

  it("the fallback parser reports which lines set each value", async () => {
    const options = parseRuntimeOptions({ host: "web-1", sshConfig: fixture });
    const plan = await resolvePlan(options, { evaluator: "parser", provenance: true });
    const sources = plan.hops[0]!.sources!;
    expect(sources.hostname).toEqual([`${fixture}:6: HostName %h.example.net`]);
    expect(sources.identityfile).toHaveLength(3);
    expect(sources.connecttimeout).toEqual([`${fixture}:22: ConnectTimeout 7`]);
    expect(sources.serveralivecountmax?.[0]).toMatch(/main\.conf:\d+: ServerAliveCountMax 4$/);
  });
});

describe("ssh_config refusals, overrides and chains (both evaluators)", () => {
  const evaluators = hasSsh ? (["ssh -G", "parser"] as const) : (["parser"] as const);
  const write = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };

  it.each(evaluators)("%s: what ssh2 cannot honour is one line naming the keyword", async (evaluator) => {
    const key = join(dir, "certkey");
    if (!existsSync(key)) {
      writeKeyFile(key);
      writeFileSync(`${key}-cert.pub`, "ssh-ed25519-cert-v01@openssh.com AAAA fake\n");
    }
    const file = write(
      "refuse.conf",
      `Host cert\n  CertificateFile ~/c.pub\nHost certbeside\n  IdentityFile ${key}\nHost fdpass\n  ProxyCommand nc %h %p\n  ProxyUseFdpass yes\nHost p11\n  PKCS11Provider /usr/lib/p11.so\nHost pw\n  PubkeyAuthentication no\nHost kbd\n  PreferredAuthentications keyboard-interactive,password\nHost nocheck\n  StrictHostKeyChecking no\n`,
    );
    const cases: Array<[string, RegExp]> = [
      ["cert", /CertificateFile is not supported/],
      ["certbeside", /-cert\.pub lies beside the key/],
      ["fdpass", /ProxyUseFdpass is not supported/],
      ["p11", /PKCS11Provider is not supported/],
      ["pw", /PubkeyAuthentication no is not supported/],
      ["kbd", /PreferredAuthentications keyboard-interactive,password is not supported/],
      ["nocheck", /StrictHostKeyChecking no is not supported/],
    ];
    for (const [host, message] of cases) {
      const err = await resolvePlan(parseRuntimeOptions({ host, sshConfig: file }), { evaluator }).catch((e: unknown) => e);
      expect(err, host).toBeInstanceOf(RuntimeError);
      expect((err as RuntimeError).errorClass).toBe("input");
      expect((err as Error).message).toMatch(message);
      expect((err as Error).message).not.toContain("\n");
    }
  });

  it.each(evaluators)("%s: a ProxyCommand is the rest of its line, verbatim: double quotes and a lone = kept", async (evaluator) => {
    const command = `sh -c 'test "$TOKEN" = s3 || exit 5; exec nc %h %p'`;
    const file = write(
      "verbatim.conf",
      `Host eq
  ProxyCommand=${command}  
Host sp
  ProxyCommand ${command}
`,
    );
    for (const host of ["eq", "sp"]) {
      const plan = await resolvePlan(parseRuntimeOptions({ host, sshConfig: file }), { evaluator });
      expect(plan.hops[0]!.proxyCommand, host).toBe(`sh -c 'test "$TOKEN" = s3 || exit 5; exec nc ${host} 22'`);
    }
  });

  it.each(evaluators)("%s: options given explicitly win over the config, for the target only", async (evaluator) => {
    const file = write(
      "override.conf",
      "Host box\n  HostName box.example\n  User cfguser\n  Port 2200\n  IdentityFile ~/cfgkey\n  ConnectTimeout 3\n  ProxyJump jumper\nHost jumper\n  User jumpuser\n  Port 2201\n",
    );
    const plan = await resolvePlan(
      parseRuntimeOptions({ host: "box", sshConfig: file, user: "optuser", port: 2999, identityFile: "/keys/opt", connectTimeoutMs: 4500 }),
      { evaluator },
    );
    const [jump, target] = plan.hops;
    expect(target).toMatchObject({
      host: "box.example",
      user: "optuser",
      port: 2999,
      identityFiles: ["/keys/opt"],
      connectTimeoutMs: 4500,
    });
    // The jump host keeps its own config; without a ConnectTimeout there, the runtime's timeout applies.
    expect(jump).toMatchObject({ host: "jumper", user: "jumpuser", port: 2201, connectTimeoutMs: 4500 });
    const fromConfig = await resolvePlan(parseRuntimeOptions({ host: "box", sshConfig: file }), { evaluator });
    expect(fromConfig.hops[1]).toMatchObject({
      user: "cfguser",
      port: 2200,
      identityFiles: [`${userInfo().homedir}/cfgkey`],
      connectTimeoutMs: 3000,
    });
  });

  it("sshConfig false ignores config files: the options are the whole story", async () => {
    const plan = await resolvePlan(parseRuntimeOptions({ host: "box", sshConfig: false, port: 2022 }));
    expect(plan.via).toBe("options");
    expect(plan.hops).toHaveLength(1);
    expect(plan.hops[0]).toMatchObject({ host: "box", port: 2022, identityFiles: [] });
  });
});

const agentHere = unless(
  needs.localHost("the agent must hold the rig's key"),
  needs.command("ssh-agent", "OpenSSH's agent is not installed"),
  needs.command("ssh-add", "loads the agent"),
);

describe("IdentitiesOnly with an ssh-agent holding other keys (real sshd)", agentHere, () => {
  const r = rig();
  const agentSide = suite("all");
  let agent: ChildProcess;
  const sock = join(dir, `agent-${id}.sock`);
  const saved = process.env.SSH_AUTH_SOCK;
  let file: string;

  beforeAll(async () => {
    agent = spawn("ssh-agent", ["-D", "-a", sock], { stdio: "ignore" });
    agentSide.push(() => agent.kill());
    await waitFor(() => existsSync(sock), 5000);
    // The agent holds the key the server accepts; the config names another one.
    execFileSync("ssh-add", ["-q", r.identityFile], { env: { ...process.env, SSH_AUTH_SOCK: sock }, stdio: "ignore" });
    const stranger = join(dir, "stranger");
    writeKeyFile(stranger);
    const common = `  HostName ${r.host}\n  Port ${r.port}\n  User ${r.user}\n  IdentityFile ${stranger}\n  UserKnownHostsFile ${r.knownHostsFile}\n`;
    file = join(dir, "agent.conf");
    writeFileSync(file, `Host only\n${common}  IdentitiesOnly yes\nHost any\n${common}`);
    process.env.SSH_AUTH_SOCK = sock;
    agentSide.push(() => {
      if (saved === undefined) delete process.env.SSH_AUTH_SOCK;
      else process.env.SSH_AUTH_SOCK = saved;
    });
  });

  it("without IdentitiesOnly the agent's key logs in; with it, the agent may offer only the listed key", async () => {
    const c = await connectSsh(parseRuntimeOptions({ host: "any", sshConfig: file, broker: false }));
    c.close();
    const err = await connectSsh(parseRuntimeOptions({ host: "only", sshConfig: file, broker: false })).then(
      (conn) => {
        conn.close();
        throw new Error("IdentitiesOnly let the agent's other key in");
      },
      (e: unknown) => e as RuntimeError,
    );
    expect(err.errorClass).toBe("auth");
    expect(err.message).toContain("IdentitiesOnly: listed keys only");
  });
});
