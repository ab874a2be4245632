// The demo's embedded SSH server must behave like the parts of sshd the runtime relies on:
// verified host key, public-key auth only, exec with exact exit status/signal and byte-exact
// pipes, pty-req with the initial size in place and window-change applied, and a clean close.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import ssh2, { type Client as SshClient, type ClientChannel, type PseudoTtyOptions } from "ssh2";
import { existsSync, readFileSync } from "node:fs";
import { execFile, spawnSync } from "node:child_process";
import { promisify } from "node:util";
import { userInfo } from "node:os";
import { startEmbeddedServer, type EmbeddedServer } from "../../src/demo/embedded-server.js";
import { rig } from "../rig/rig.js";
import { startDelayProxy } from "../../bench/delay-proxy.mjs";
import { needs, skipUnless, unless } from "../support/needs.js";
import { generateKeyPair } from "../../src/demo/key-pair.js";
import { isGone, readArgv, readProcStat } from "../../src/shared/proc-stat.js";

const { Client } = ssh2;
const execFileAsync = promisify(execFile);
const utilLinuxScript = /util-linux/.test(spawnSync("script", ["--version"], { encoding: "utf8" }).stdout ?? "");

let server: EmbeddedServer;
beforeAll(async () => {
  server = await startEmbeddedServer();
});
afterAll(async () => {
  await server?.close();
});

function knownHostKey(): Buffer {
  const [name, algo, b64] = readFileSync(server.knownHostsFile, "utf8").trim().split(" ");
  expect(name).toBe(`[127.0.0.1]:${server.port}`);
  expect(algo).toBe("ssh-ed25519");
  return Buffer.from(b64!, "base64");
}

function connect(overrides: { privateKey?: string; username?: string; port?: number } = {}): Promise<SshClient> {
  const expected = knownHostKey();
  return new Promise((resolve, reject) => {
    const client = new Client();
    client.once("ready", () => resolve(client));
    client.once("error", reject);
    client.connect({
      host: server.host,
      port: overrides.port ?? server.port,
      username: overrides.username ?? server.user,
      privateKey: overrides.privateKey ?? readFileSync(server.identityFile, "utf8"),
      hostVerifier: (key: Buffer) => key.equals(expected),
      readyTimeout: 10_000,
    });
  });
}

interface Result {
  stdout: Buffer;
  stderr: Buffer;
  code: number | null;
  signal: string | null;
}

function run(
  client: SshClient,
  command: string,
  opts: { input?: Buffer | string; pty?: PseudoTtyOptions; env?: Record<string, string>; during?: (ch: ClientChannel) => void } = {},
): Promise<Result> {
  return new Promise((resolve, reject) => {
    client.exec(command, { ...(opts.pty ? { pty: opts.pty } : {}), ...(opts.env ? { env: opts.env } : {}) }, (err, ch) => {
      if (err) return reject(err);
      const out: Buffer[] = [];
      const errs: Buffer[] = [];
      let code: number | null = null;
      let signal: string | null = null;
      ch.on("data", (d: Buffer) => out.push(d));
      ch.stderr.on("data", (d: Buffer) => errs.push(d));
      ch.on("exit", (c: number | null, s?: string) => {
        code = c ?? null;
        signal = s ?? null;
      });
      ch.on("close", () => resolve({ stdout: Buffer.concat(out), stderr: Buffer.concat(errs), code, signal }));
      if (opts.during) opts.during(ch);
      else if (opts.input !== undefined) ch.end(opts.input);
      else ch.end();
    });
  });
}

describe("embedded SSH server", () => {
  it("runs exec requests with exact exit codes and byte-exact pipes", async () => {
    const client = await connect();
    try {
      const binary = Buffer.from([0x72, 0x61, 0x77, 0x00, 0xff, 0x0a]);
      const echoed = await run(client, "cat; printf 'err\\000' >&2; exit 19", { input: binary });
      expect(echoed.stdout.equals(binary)).toBe(true);
      expect(echoed.stderr.equals(Buffer.from("err\0"))).toBe(true);
      expect(echoed.code).toBe(19);
      const killed = await run(client, "kill -TERM $$");
      expect(killed.signal).toBe("SIGTERM");
    } finally {
      client.end();
    }
  });

  it("gives commands a minimal login-like env and refuses env requests", async () => {
    const client = await connect();
    try {
      const result = await run(client, "env", { env: { INJECTED_BY_CLIENT: "nope" } });
      const keys = result.stdout
        .toString()
        .trim()
        .split("\n")
        .map((l) => l.split("=")[0])
        .sort();
      expect(keys).toEqual(["HOME", "LOGNAME", "PATH", "PWD", "SHELL", "USER"]);
      expect(result.code).toBe(0);
    } finally {
      client.end();
    }
  });

  it("rejects other keys and other users", async () => {
    const stranger = generateKeyPair({ type: "ed25519" }).private;
    await expect(connect({ privateKey: stranger })).rejects.toThrow(/authentication methods failed/);
    await expect(connect({ username: `${server.user}-nobody` })).rejects.toThrow(/authentication methods failed/);
  });

  // Asynchronous on purpose: the server lives in this process, a sync spawn would starve it.
  it("is accepted by OpenSSH's client with strict host-key checking against its known_hosts", async (ctx) => {
    skipUnless(ctx, needs.command("ssh", "OpenSSH's client is not installed"));
    const { stdout } = await execFileAsync(
      "ssh",
      [
        "-p",
        String(server.port),
        "-i",
        server.identityFile,
        "-o",
        `UserKnownHostsFile=${server.knownHostsFile}`,
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "IdentitiesOnly=yes",
        `${server.user}@${server.host}`,
        "printf ok",
      ],
      { timeout: 20_000 },
    );
    expect(stdout).toBe("ok");
  });

  it("offers PTYs exactly when util-linux script is installed", () => {
    expect(server.ptySupported).toBe(utilLinuxScript);
  });

  it("serves pty-req with the initial size and applies window-change", unless(needs.utilLinuxScript()), async () => {
    const client = await connect();
    try {
      const initial = await run(client, "stty size; test -t 0 && echo is-a-tty", { pty: { rows: 30, cols: 100, term: "xterm" } });
      expect(initial.stdout.toString()).toBe("30 100\r\nis-a-tty\r\n");
      expect(initial.code).toBe(0);
      const resized = await run(client, "stty -echo; echo ready; read line; stty size; exit 6", {
        pty: { rows: 24, cols: 80 },
        during: (ch) => {
          let seen = "";
          ch.on("data", (d: Buffer) => {
            seen += d.toString();
            if (!seen.includes("ready")) return;
            seen = "";
            ch.setWindow(41, 99, 0, 0);
            ch.write("go\n");
          });
        },
      });
      expect(resized.stdout.toString()).toContain("41 99");
      expect(resized.code).toBe(6);
    } finally {
      client.end();
    }
  });

  it("refuses pty-req when PTYs are off, and still serves plain exec", async () => {
    const own = await startEmbeddedServer({ pty: false });
    try {
      expect(own.ptySupported).toBe(false);
      const client = await new Promise<SshClient>((resolve, reject) => {
        const c = new Client();
        c.once("ready", () => resolve(c)).once("error", reject);
        c.connect({ host: own.host, port: own.port, username: own.user, privateKey: readFileSync(own.identityFile, "utf8") });
      });
      try {
        await expect(run(client, "true", { pty: { rows: 24, cols: 80 } })).rejects.toThrow(/pseudo-terminal/i);
        expect((await run(client, "printf plain")).stdout.toString()).toBe("plain");
      } finally {
        client.end();
      }
    } finally {
      await own.close();
    }
  });

  it("serves given host keys to given authorized keys, running commands (and PTYs) as the given login user", async () => {
    const hostKey = generateKeyPair({ type: "ecdsa", bits: 256 });
    const clientKey = generateKeyPair({ type: "ed25519" });
    // As root, the rig's non-root login user (the test rig as root runs it this way); else ourselves.
    const r = rig();
    const name = process.getuid?.() === 0 && !r.external ? r.user : userInfo().username;
    const [, , uid, gid, , home] = readFileSync("/etc/passwd", "utf8")
      .split("\n")
      .find((l) => l.startsWith(`${name}:`))!
      .split(":");
    const own = await startEmbeddedServer({
      hostKeys: [hostKey.private],
      authorizedKeys: [clientKey.public],
      login: { user: name, uid: Number(uid), gid: Number(gid), home: home! },
    });
    try {
      const [, algo, b64] = readFileSync(own.knownHostsFile, "utf8").trim().split(" ");
      expect(`${algo} ${b64}`).toBe(hostKey.public.trim().split(" ").slice(0, 2).join(" "));
      const client = await new Promise<SshClient>((resolve, reject) => {
        const c = new Client();
        c.once("ready", () => resolve(c)).once("error", reject);
        c.connect({
          host: own.host,
          port: own.port,
          username: name,
          privateKey: clientKey.private,
          hostVerifier: (key: Buffer) => key.equals(Buffer.from(b64!, "base64")),
        });
      });
      try {
        const ids = await run(client, 'id -u; id -g; echo "$HOME"; pwd');
        expect(ids.stdout.toString()).toBe(`${uid}\n${gid}\n${home}\n${home}\n`);
        if (own.ptySupported) {
          const tty = await run(client, "stty size; id -u", { pty: { rows: 33, cols: 77 } });
          expect(tty.stdout.toString()).toBe(`33 77\r\n${uid}\r\n`);
        }
      } finally {
        client.end();
      }
    } finally {
      await own.close();
    }
  });

  it("a command whose connection is reset while it runs: its pipes close as under sshd, so it reads EOF and a write fails", async () => {
    const proxy = await startDelayProxy({ targetPort: server.port, delayMs: 0 });
    const client = await connect({ port: proxy.port });
    client.on("error", () => undefined);
    // A writer that never reads its stdin: only a closed stdout ends it.
    const pid = await pidOf(client, "echo $$; exec sh -c 'while echo x; do sleep 0.1; done' writer");
    const started = await until(() => {
      const st = readProcStat(pid);
      return st && readArgv(pid).join(" ").endsWith(" writer") ? st : null;
    });
    proxy.cutAll({ reset: true });
    try {
      // The bound only keeps a broken run from hanging: before, the writer wrote on until close().
      await until(() => (isGone(pid, started.startTime) ? true : null), 20_000);
    } finally {
      client.destroy();
      await proxy.close();
    }
  });

  it("close() kills what it started and removes its directory", async () => {
    const own = await startEmbeddedServer();
    const client = await new Promise<SshClient>((resolve, reject) => {
      const c = new Client();
      c.once("ready", () => resolve(c)).once("error", reject);
      c.connect({ host: own.host, port: own.port, username: own.user, privateKey: readFileSync(own.identityFile, "utf8") });
    });
    client.on("error", () => undefined);
    // The command names itself: the shell prints its pid, then becomes `sleep` in place. The
    // process is then known by pid and start time, never by a command-line pattern that another
    // run's process (another worker's pid with more digits, a reused pid) could also match.
    const pid = await pidOf(client, "echo $$; exec sleep 31");
    const started = await until(() => {
      const st = readProcStat(pid);
      return st && readArgv(pid).join(" ") === "sleep 31" ? st : null;
    });
    await own.close();
    expect(isGone(pid, started.startTime)).toBe(true);
    expect(existsSync(own.dir)).toBe(false);
  });
});

/** Runs `command`, which prints its shell's pid first (then becomes the process in place); resolves with it. */
function pidOf(client: SshClient, command: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    client.exec(command, (err, ch) => {
      if (err) return reject(err);
      let text = "";
      ch.on("data", (d: Buffer) => {
        text += d.toString("utf8");
        const m = /^(\d+)\n/.exec(text);
        if (m) resolve(Number(m[1]));
      });
      ch.on("close", () => reject(new Error(`the command ended before printing its pid: ${JSON.stringify(text)}`)));
    });
  });
}

/** Polls until `value()` is non-null; the bound only keeps a broken run from hanging. */
async function until<T>(value: () => T | null, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = value();
    if (v !== null) return v;
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((r) => setTimeout(r, 25));
  }
}
