// A git source whose URL carries credentials (`http://user:TOKEN@host/repo.git`), over the real
// sshd, against a real HTTP git server that demands them (git http-backend behind a small node
// server with basic auth, slowed down so every git process lives long enough to be seen). While
// the create runs, every command line on the host is read from /proc: the token must never be in
// one, nor in any file under the root, nor in what the user is told when the create fails.
import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { existsSync, lstatSync, readdirSync, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import type { CreateInput } from "../../src/contract/schemas.js";
import { gitSourceAccess, redactUrl } from "../../src/remote-agent/workspace/git-credentials.js";
import { gitSourceRepo } from "../fixtures/repo.js";
import { hostProcesses } from "../support/host-processes.js";
import { onHost } from "../support/host-view.js";
import { rig } from "../rig/rig.js";
import { cliDriver, type Driver, removeRoot } from "../support/workspace.js";
import { needs, unless } from "../support/needs.js";

const USER = "paseo";
const TOKEN = `tok${randomBytes(12).toString("hex")}`;
const DELAY_MS = 250;

/** Serves `projectRoot` with git http-backend (CGI), answering 401 to anything but USER:TOKEN. */
function authGitServer(projectRoot: string): { server: Server; authorized: () => number } {
  let authorized = 0;
  const expected = `Basic ${Buffer.from(`${USER}:${TOKEN}`).toString("base64")}`;
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    if (req.headers.authorization !== expected) {
      req.resume();
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="test"' }).end();
      return;
    }
    authorized++;
    const url = new URL(req.url ?? "/", "http://localhost");
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: "1",
      REQUEST_METHOD: req.method ?? "GET",
      PATH_INFO: url.pathname,
      QUERY_STRING: url.search.slice(1),
      REMOTE_USER: USER,
      REMOTE_ADDR: "127.0.0.1",
    };
    if (req.headers["content-type"]) env.CONTENT_TYPE = req.headers["content-type"];
    if (req.headers["content-encoding"]) env.HTTP_CONTENT_ENCODING = String(req.headers["content-encoding"]);
    if (req.headers["git-protocol"]) env.GIT_PROTOCOL = String(req.headers["git-protocol"]);
    const cgi = spawn("git", ["http-backend"], { env, stdio: ["pipe", "pipe", "ignore"] });
    req.pipe(cgi.stdin);
    let head: Buffer | null = Buffer.alloc(0);
    cgi.stdout.on("data", (chunk: Buffer) => {
      if (head === null) return void res.write(chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      const headers: Record<string, string> = {};
      let status = 200;
      for (const line of head.subarray(0, end).toString("latin1").split("\r\n")) {
        const colon = line.indexOf(":");
        const [k, v] = [line.slice(0, colon).trim(), line.slice(colon + 1).trim()];
        if (k.toLowerCase() === "status") status = Number(v.split(" ")[0]);
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
      head = null;
    });
    cgi.stdout.on("end", () => res.end());
  };
  const server = createServer((req, res) => void setTimeout(() => handle(req, res), DELAY_MS));
  return { server, authorized: () => authorized };
}

/** Every regular file under `dir` whose bytes contain `needle`. */
function filesContaining(dir: string, needle: string): string[] {
  const hits: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatSync(p);
    if (st.isDirectory()) hits.push(...filesContaining(p, needle));
    else if (st.isFile() && readFileSync(p).includes(needle)) hits.push(p);
  }
  return hits;
}

describe(
  "credentials in a git source URL over SSH",
  unless(needs.localHost("its git server listens on this machine's loopback, which another host cannot reach")),
  () => {
    const s = suite("all");
    let base: string;
    let d: Driver;
    let git: ReturnType<typeof authGitServer>;
    let origin: string;

    const input = (workspaceId: string, token: string): CreateInput => ({
      workspaceId,
      project: { projectId: "cred-project", source: { kind: "git", url: `http://${USER}:${token}@${origin}/source.git`, revision: "" } },
      placement: { kind: "existing" },
    });

    /** Runs `fn` while collecting every host command line that mentions the server or `secret`. */
    async function watchingCommandLines<T>(secret: string, fn: () => Promise<T>): Promise<{ result: T; lines: string[] }> {
      const lines = new Set<string>();
      let on = true;
      const scan = (async () => {
        while (on) {
          for (const p of hostProcesses()) {
            const line = p.argv.join(" ");
            if (line.includes(secret) || line.includes(origin)) lines.add(line);
          }
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      try {
        return { result: await fn(), lines: [...lines] };
      } finally {
        on = false;
        await scan;
      }
    }

    beforeAll(async () => {
      base = s.tmp("paseo-ws-cred-");
      gitSourceRepo(base);
      git = authGitServer(base);
      s.push(() => new Promise((resolve) => git.server.close(resolve)));
      await new Promise<void>((resolve) => git.server.listen(0, "127.0.0.1", resolve));
      origin = `127.0.0.1:${(git.server.address() as { port: number }).port}`;
      d = cliDriver("cred");
      s.push(() => removeRoot(d.root));
    });

    it("the token authenticates the fetch but is in no command line, file or message on the host", async () => {
      const { result: r, lines } = await watchingCommandLines(TOKEN, () => d.create(input("cred-ok", TOKEN)));
      expect(r.message).toBe("");
      expect(readFileSync(join(r.value!.placement.cwd, "packages", "app", "marker.txt"), "utf8")).toBe("default\n");
      expect(git.authorized()).toBeGreaterThan(0);
      // The scan did see git talking to the server (ls-remote and fetch, and their http helper)...
      expect(lines.some((l) => l.includes("git-remote-http") && l.includes(origin))).toBe(true);
      // ...and never the token.
      expect(lines.filter((l) => l.includes(TOKEN))).toEqual([]);
      expect(filesContaining(d.root, TOKEN)).toEqual([]);
      const home = rig().remoteHome!;
      for (const f of [".git-credentials", ".gitconfig"]) {
        if (existsSync(join(home, f))) expect(readFileSync(join(home, f), "utf8")).not.toContain(TOKEN);
      }
      expect(JSON.stringify(r.value)).not.toContain(TOKEN);
      expect((await d.op("destroy", "cred-ok")).ok).toBe(true);
    });

    it("a wrong token fails with a line that shows neither token", async () => {
      const wrong = `bad${randomBytes(12).toString("hex")}`;
      const { result: r, lines } = await watchingCommandLines(wrong, () => d.create(input("cred-bad", wrong)));
      expect(r.ok).toBe(false);
      expect(r.message).toMatch(/^git ls-remote failed \(exit 128\): .*Authentication failed/);
      expect(r.stderr).not.toContain(wrong);
      expect(lines.filter((l) => l.includes(wrong))).toEqual([]);
      expect(existsSync(onHost(join(d.root, "workspaces"))) ? readdirSync(onHost(join(d.root, "workspaces"))) : []).toEqual([]);
    });
  },
);

describe("splitting credentials off a git source URL", () => {
  it("http-like URLs lose all userinfo to the helper's environment; percent-encoding is decoded", () => {
    const a = gitSourceAccess("https://x-token:p%40ss%2Fw@git.example.com:8443/org/repo.git");
    expect(a.url).toBe("https://git.example.com:8443/org/repo.git");
    expect(a.env).toMatchObject({
      PASEO_GIT_CRED_PROTOCOL: "https",
      PASEO_GIT_CRED_HOST: "git.example.com:8443",
      PASEO_GIT_CRED_USERNAME: "x-token",
      PASEO_GIT_CRED_PASSWORD: "p@ss/w",
      GIT_CONFIG_VALUE_0: "",
    });
    expect(a.env.GIT_CONFIG_VALUE_1).not.toContain("p@ss");
    expect(gitSourceAccess("https://ghp_token@github.com/o/r").env.PASEO_GIT_CRED_USERNAME).toBe("ghp_token");
  });

  it("ssh logins stay (they are no secret), passwords go; URLs without credentials pass unchanged", () => {
    expect(gitSourceAccess("ssh://git:secret@host/r.git")).toEqual({ url: "ssh://git@host/r.git", env: {} });
    expect(gitSourceAccess("ssh://git@host/r.git")).toEqual({ url: "ssh://git@host/r.git", env: {} });
    expect(gitSourceAccess("git@host:o/r.git")).toEqual({ url: "git@host:o/r.git", env: {} });
    expect(gitSourceAccess("file:///srv/r.git")).toEqual({ url: "file:///srv/r.git", env: {} });
  });

  it("messages show userinfo as ***", () => {
    expect(redactUrl("http://u:TOKEN@h/r.git")).toBe("http://***@h/r.git");
    expect(redactUrl("ssh://git:pw@h/r.git")).toBe("ssh://git:***@h/r.git");
    expect(redactUrl("ssh://git@h/r.git")).toBe("ssh://git@h/r.git");
    expect(() => gitSourceAccess("https://u:a%0Ab@h/r")).toThrow("Git source URL credentials contain a line break: https://***@h/r");
  });
});
