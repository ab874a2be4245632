// forwardGitCredentials over the real server (issue 28, item 3): a forge on this machine (git
// http-backend behind HTTP Basic auth with a fixed token) takes an HTTP push from a workspace
// created with the option, whose git asks the Paseo side's own credential helper (a script that
// reads the token from a file here); the token shows up in no file under the host's root or the
// host user's home and in no process's argv or environment while the push runs and after. Without
// the option the push fails at once; a host that is not among the Paseo side repository's remotes
// gets nothing, even when the workspace's own config names it; a failing helper or a lost link
// fails the push with a line saying why, never a prompt or a hang.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, lstatSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { rig, rigOptions } from "../rig/rig.js";
import { ExecWorkspace, exitOf, secretLeaks, sleep } from "../support/exec.js";
import { finish, throughProxy } from "../support/host-daemon.js";
import { needs, skipUnless, unless } from "../support/needs.js";
import { CLI_PATH } from "../support/run-cli.js";
import { hostGit, requireView } from "../support/host-view.js";
import type { DelayProxy } from "../../bench/delay-proxy.mjs";

const needed = unless(needs.localHost("the host's git pushes to a forge listening on this machine's loopback"));

const TOKEN = `tok-${Date.now().toString(36)}-9f2c71e4ab`;
const ENV = { PATH: "/usr/local/bin:/usr/bin:/bin", CRED_TEST: "exact" };

interface Forge {
  port: number;
  bare: string;
  /** Called when a push's pack arrives (authenticated); the push waits until it resolves. */
  onPack: (() => Promise<void>) | null;
  close(): Promise<void>;
}

/** git http-backend (smart HTTP, receive-pack on) behind Basic auth for `u:TOKEN`, on every local address. */
async function startForge(dir: string): Promise<Forge> {
  const bare = join(dir, "forge.git");
  execFileSync("git", ["init", "-q", "--bare", bare]);
  execFileSync("git", ["-C", bare, "config", "http.receivepack", "true"]);
  const wanted = `Basic ${Buffer.from(`u:${TOKEN}`).toString("base64")}`;
  const forge: Forge = { port: 0, bare, onPack: null, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    if (req.headers.authorization !== wanted) {
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="forge"' }).end();
      req.resume();
      return;
    }
    const url = new URL(req.url ?? "/", "http://forge");
    const pack = req.method === "POST" && url.pathname.endsWith("/git-receive-pack");
    const serve = () => {
      const cgi = spawn("git", ["http-backend"], {
        env: {
          PATH: process.env.PATH,
          GIT_PROJECT_ROOT: dir,
          GIT_HTTP_EXPORT_ALL: "1",
          REQUEST_METHOD: req.method,
          PATH_INFO: url.pathname,
          QUERY_STRING: url.search.slice(1),
          CONTENT_TYPE: req.headers["content-type"] ?? "",
          ...(req.headers["content-length"] ? { CONTENT_LENGTH: req.headers["content-length"] } : {}),
          ...(req.headers["content-encoding"] ? { HTTP_CONTENT_ENCODING: req.headers["content-encoding"] } : {}),
          REMOTE_USER: "u",
          REMOTE_ADDR: "127.0.0.1",
        },
      });
      req.pipe(cgi.stdin);
      const out: Buffer[] = [];
      cgi.stdout.on("data", (d: Buffer) => out.push(d));
      cgi.on("close", () => {
        const all = Buffer.concat(out);
        const end = all.indexOf("\r\n\r\n");
        const headers = all.subarray(0, end).toString("latin1").split("\r\n");
        let status = 200;
        for (const h of headers) {
          const [name, ...rest] = h.split(":");
          const value = rest.join(":").trim();
          if (name!.toLowerCase() === "status") status = Number(value.split(" ")[0]);
          else res.setHeader(name!, value);
        }
        res.writeHead(status).end(all.subarray(end + 4));
      });
    };
    if (pack && forge.onPack) void forge.onPack().then(serve);
    else serve();
  });
  await new Promise<void>((resolve) => server.listen(0, "0.0.0.0", resolve));
  forge.port = (server.address() as { port: number }).port;
  forge.close = () => new Promise((resolve) => server.close(() => resolve()));
  return forge;
}

describe(
  "forwardGitCredentials: git in the workspace pushes over HTTP with the Paseo side's credential helper",
  { timeout: 120_000, ...needed },
  () => {
    const cleanups = suite("all");
    let dir: string;
    let forge: Forge;
    let url: string;
    let proxy: DelayProxy;
    let withCreds: ExecWorkspace;
    let without: ExecWorkspace;
    /** The Paseo side's helper: answers the token from a file, or fails, or sleeps first, as told by files. */
    const helperScript = (d: string) => `#!/bin/sh
[ "$1" = get ] || exit 0
touch '${d}/asked'
[ -f '${d}/fail' ] && exit 1
[ -f '${d}/slow' ] && sleep 8
echo username=u
echo password=$(cat '${d}/token')
`;
    const prepare = (repo: string) => {
      execFileSync("git", ["-C", repo, "remote", "add", "origin", url]);
      execFileSync("git", ["-C", repo, "config", "credential.helper", join(dir, "helper.sh")]);
    };

    beforeAll(async () => {
      dir = cleanups.tmp("paseo-cred-");
      chmodSync(dir, 0o755);
      writeFileSync(join(dir, "token"), TOKEN, { mode: 0o600 });
      writeFileSync(join(dir, "helper.sh"), helperScript(dir), { mode: 0o700 });
      forge = await startForge(dir);
      cleanups.push(() => forge.close());
      url = `http://127.0.0.1:${forge.port}/forge.git`;
      // Newest first: the proxy closes after the workspaces' removal, which goes through it.
      const through = await throughProxy(cleanups, { forwardGitCredentials: true, sshConfig: false });
      proxy = through.proxy;
      withCreds = new ExecWorkspace("cred-on", { ...through.options, sshConfig: false });
      cleanups.push(() => finish(withCreds));
      without = new ExecWorkspace("cred-off", { sshConfig: false });
      cleanups.push(() => finish(without));
      await Promise.all([withCreds.create(prepare), without.create(prepare)]);
    });

    const git = (ws: ExecWorkspace, args: string[], stdin?: string) =>
      ws.run({ argv: ["git", ...args], env: ENV, cwd: ws.root }, stdin === undefined ? {} : { stdin, keepStdinOpen: false });
    const forgeHas = (branch: string) =>
      spawnSync("git", ["-C", forge.bare, "rev-parse", "--verify", "--quiet", `refs/heads/${branch}`]).status === 0;
    const flag = (name: string, on: boolean) => (on ? writeFileSync(join(dir, name), "") : rmSync(join(dir, name), { force: true }));
    /**
     * Where the token could be on the host: every process's argv and environment, every file under
     * the root (workspaces, run/, tmp/), and the host user's own files where git and its helpers
     * keep credentials (the files directly in the home, ~/.config); the rest of the home holds
     * other suites' roots, written and removed meanwhile.
     */
    const leaks = () => {
      const found = secretLeaks(TOKEN, withCreds.configuredRoot, new Set());
      const home = rig().remoteHome;
      if (home) {
        const view = requireView();
        for (const name of readdirSync(view.path(home))) {
          const p = join(home, name);
          const st = lstatSync(view.path(p), { throwIfNoEntry: false });
          if (st?.isFile() && readFileSync(view.path(p)).includes(TOKEN)) found.files.push(p);
        }
        if (existsSync(view.path(join(home, ".config")))) found.files.push(...secretLeaks(TOKEN, join(home, ".config"), new Set()).files);
      }
      return found;
    };

    it("a push succeeds with the option, and the token is in no file, argv or environment on the host", async () => {
      const during: Array<ReturnType<typeof leaks>> = [];
      forge.onPack = async () => {
        during.push(leaks());
      };
      const ok = await git(withCreds, ["push", "-q", "origin", "HEAD:refs/heads/with-creds"]);
      forge.onPack = null;
      expect(ok.stderr.toString()).toBe("");
      expect(exitOf(ok)).toEqual({ code: 0, signal: null });
      expect(forgeHas("with-creds")).toBe(true);
      expect(during).toEqual([{ argv: [], environ: [], files: [] }]);
      expect(leaks()).toEqual({ argv: [], environ: [], files: [] });
      // The workspace's git names our helper, after an empty one that drops the host's own.
      expect(hostGit(withCreds.root, ["config", "--get-all", "credential.helper"])).toMatch(
        /^\n!'.*' '.*agent\.cjs' git-credential [0-9a-f]{20}\n$/,
      );
      const env = await withCreds.run({ argv: ["/usr/bin/env"], env: ENV });
      expect(env.stdout.toString()).toBe("PATH=/usr/local/bin:/usr/bin:/bin\nCRED_TEST=exact\n");
    });

    it("without the option the same push fails at once with git's own error", async () => {
      const started = Date.now();
      const refused = await git(without, ["push", "-q", "origin", "HEAD:refs/heads/without"]);
      expect(exitOf(refused).code).not.toBe(0);
      expect(refused.stderr.toString()).toMatch(/could not read Username/);
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(forgeHas("without")).toBe(false);
    });

    it("a host that is not among the Paseo side repository's remotes gets nothing, even when the workspace's config names it", async (ctx) => {
      flag("asked", false);
      expect(exitOf(await git(withCreds, ["remote", "add", "evil", `http://127.0.0.2:${forge.port}/forge.git`])).code).toBe(0);
      const evil = await git(withCreds, ["push", "-q", "evil", "HEAD:refs/heads/evil"]);
      expect(exitOf(evil).code).not.toBe(0);
      expect(evil.stderr.toString()).toMatch(
        /no credential for http:\/\/127\.0\.0\.2:\d+ from the Paseo side: .* is not the host of a remote/,
      );
      expect(forgeHas("evil")).toBe(false);
      const fill = await git(withCreds, ["credential", "fill"], "protocol=https\nhost=evil.example\n\n");
      expect(exitOf(fill).code).not.toBe(0);
      expect(fill.stdout.toString()).not.toMatch(/password/);
      expect(fill.stderr.toString()).toMatch(/no credential for https:\/\/evil\.example/);
      // The Paseo side's helper was never even asked.
      expect(existsSync(join(dir, "asked"))).toBe(false);
      // On a terminal git would prompt for a username and wait: it stops instead.
      skipUnless(ctx, needs.pty());
      const onTty = withCreds.start({
        argv: ["git", "push", "-q", "evil", "HEAD:refs/heads/evil-tty"],
        env: ENV,
        cwd: withCreds.root,
        stdio: { kind: "pty", rows: 24, cols: 200 },
      });
      const r = await Promise.race([onTty.done, sleep(15_000).then(() => null)]);
      if (r === null) await withCreds.signal(onTty.execId, "SIGKILL");
      expect(r && exitOf(r).code).not.toBe(0);
      expect(r?.stdout.toString()).toMatch(/told us to quit/);
      expect(r?.stdout.toString()).not.toMatch(/Username for/);
    });

    it("a failing helper on the Paseo side fails the push at once, saying so", async () => {
      flag("fail", true);
      try {
        const started = Date.now();
        const failed = await git(withCreds, ["push", "-q", "origin", "HEAD:refs/heads/helper-failed"]);
        expect(exitOf(failed).code).not.toBe(0);
        expect(failed.stderr.toString()).toMatch(
          /no credential for http:\/\/127\.0\.0\.1:\d+ from the Paseo side: git credential fill on the Paseo side gave none/,
        );
        expect(Date.now() - started).toBeLessThan(15_000);
        expect(forgeHas("helper-failed")).toBe(false);
      } finally {
        flag("fail", false);
      }
    });

    it("a link lost while the Paseo side is asked fails the push at once, never a hang", async () => {
      flag("slow", true);
      flag("asked", false);
      try {
        const push = withCreds.start({ argv: ["git", "push", "-q", "origin", "HEAD:refs/heads/link-lost"], env: ENV, cwd: withCreds.root });
        const until = Date.now() + 20_000;
        while (!existsSync(join(dir, "asked")) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
        const cut = Date.now();
        proxy.cutAll({ reset: true });
        const r = await push.done;
        expect(exitOf(r).code).not.toBe(0);
        expect(r.stderr.toString()).toMatch(
          /no credential for http:\/\/127\.0\.0\.1:\d+ from the Paseo side: the Paseo side did not answer/,
        );
        // Well before the helper on the Paseo side would have answered (8 s).
        expect(Date.now() - cut).toBeLessThan(7_000);
        expect(forgeHas("link-lost")).toBe(false);
      } finally {
        flag("slow", false);
      }
    });

    it("doctor says credential forwarding is on and whether git credential answers here", () => {
      const options = rigOptions({ root: withCreds.configuredRoot, forwardGitCredentials: true, sshConfig: false });
      const doctor = spawnSync(process.execPath, [CLI_PATH, "doctor", "--options", JSON.stringify(options)], {
        cwd: withCreds.localRepo,
        encoding: "utf8",
        timeout: 60_000,
      });
      expect(doctor.stdout).toMatch(
        /^ok +git credentials .*forwarded for the hosts of each workspace's remotes; git credential answers for http:\/\/127\.0\.0\.1:\d+ \(user u\)/m,
      );
      expect(doctor.stdout).not.toContain(TOKEN);
    });
  },
);
