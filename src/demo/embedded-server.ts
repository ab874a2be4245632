// A throw-away SSH server on 127.0.0.1 so `paseo-ssh-runtime demo` can show the real runtime
// working without any host set up: the runtime connects to it exactly as to OpenSSH (verified
// host key from a known_hosts file, public-key auth), and it runs exec requests as the current user
// (or, started by root, as a given login user). The test rig uses it where OpenSSH's sshd is absent.
//
// It is deliberately small: `session` channels with `exec` (plus `pty-req`, `window-change`,
// `signal`); `env` requests are refused, shells and subsystems are refused. PTYs come from
// util-linux `script`, so no native module is needed; without it PTY requests are refused.
import ssh2, { type Connection, type ParsedKey, type Server, type ServerChannel, type Session } from "ssh2";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { timingSafeEqual } from "node:crypto";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import { RuntimeError } from "../shared/errors.js";
import { sleep } from "../shared/async.js";
import { generateKeyPair } from "./key-pair.js";

// ssh2 is CommonJS: named imports do not survive the ESM bundle, the default export does.
const { Server: SshServer, utils } = ssh2;

export interface EmbeddedServer {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  /** OpenSSH private key the server accepts (mode 0600). */
  readonly identityFile: string;
  /** known_hosts with exactly this server's `[127.0.0.1]:<port>` entry. */
  readonly knownHostsFile: string;
  /** Private temp directory holding the files above; removed by close(). */
  readonly dir: string;
  /** Whether `pty-req` is served (util-linux `script` found). */
  readonly ptySupported: boolean;
  /** Stops listening, ends connections, kills what it started, removes `dir`. Bounded. */
  close(): Promise<void>;
}

interface PtyInfo {
  rows: number;
  cols: number;
  term: string;
}

const CLOSE_GRACE_MS = 1_000;

/**
 * A short base for the server's directory: the demo's remote root lives inside it, and the runtime
 * puts Unix sockets under that root, whose paths must stay below ~104 bytes.
 */
export function shortTempBase(): string {
  const base = tmpdir();
  return base.length > 40 && existsSync("/tmp") ? "/tmp" : base;
}

/** Who exec requests run as. */
export interface EmbeddedLogin {
  user: string;
  uid: number;
  gid: number;
  home: string;
}

export interface EmbeddedServerOptions {
  /** Serve pty-req (default: when util-linux `script` is installed; forcing true without it fails). */
  pty?: boolean;
  /** Host private keys (OpenSSH or PEM text); default: one fresh ed25519 key. */
  hostKeys?: string[];
  /** Public keys (`type base64 [comment]`) accepted besides the server's own `identityFile`. */
  authorizedKeys?: string[];
  /** The only user that may log in, and whom commands run as (another user needs root); default: the current user. */
  login?: EmbeddedLogin;
}

export async function startEmbeddedServer(opts: EmbeddedServerOptions = {}): Promise<EmbeddedServer> {
  const scriptFound = hasUtilLinuxScript();
  if (opts.pty === true && !scriptFound) {
    throw new RuntimeError("remote-dependency", "the embedded SSH server needs util-linux script for PTYs");
  }
  const dir = mkdtempSync(join(shortTempBase(), "psd-"));
  try {
    return await listen(dir, opts.pty ?? scriptFound, opts);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

function currentLogin(): EmbeddedLogin {
  const me = userInfo();
  return { user: me.username, uid: me.uid, gid: me.gid, home: me.homedir };
}

function parsedKey(text: string): ParsedKey {
  const key = utils.parseKey(text);
  const first = Array.isArray(key) ? key[0] : key;
  if (!first || first instanceof Error) throw new RuntimeError("input", `embedded server key: ${first?.message ?? "no key"}`);
  return first;
}

async function listen(dir: string, ptySupported: boolean, opts: EmbeddedServerOptions): Promise<EmbeddedServer> {
  const login = opts.login ?? currentLogin();
  const user = login.user;
  const hostKeys = opts.hostKeys ?? [generateKeyPair({ type: "ed25519" }).private];
  const clientKey = generateKeyPair({ type: "ed25519" });
  const identityFile = join(dir, "id_ed25519");
  writeFileSync(identityFile, clientKey.private, { mode: 0o600 });
  const allowed = [clientKey.public, ...(opts.authorizedKeys ?? [])].map(parsedKey);
  // PTY commands publish their tty name into a file; a login user other than us needs a place
  // of their own for it.
  const ttyDir = join(dir, "tty");
  mkdirSync(ttyDir, { mode: 0o700 });
  if (login.uid !== process.getuid?.()) {
    chownSync(ttyDir, login.uid, login.gid);
    chmodSync(dir, 0o711);
  }

  const children = new Set<ChildProcess>();
  const connections = new Set<Connection>();

  const server = new SshServer({ hostKeys }, (client) => {
    connections.add(client);
    client.on("close", () => connections.delete(client));
    // A dropped demo client must not crash the demo; the runtime reports its own side.
    client.on("error", () => connections.delete(client));
    client.on("authentication", (ctx) => {
      if (ctx.method !== "publickey" || !sameBytes(Buffer.from(ctx.username), Buffer.from(user))) return ctx.reject(["publickey"]);
      const offered = ctx.key;
      const key = allowed.find((k) => offered.algo === k.type && sameBytes(offered.data, k.getPublicSSH()));
      if (!key) return ctx.reject(["publickey"]);
      // Without a signature the client only asks whether the key would do; with one, prove it.
      if (ctx.signature && key.verify(ctx.blob!, ctx.signature, ctx.hashAlgo) !== true) {
        return ctx.reject(["publickey"]);
      }
      ctx.accept();
    });
    client.on("ready", () => {
      client.on("session", (acceptSession) => {
        serveSession(acceptSession(), { login, ptySupported, ttyDir, children });
      });
    });
  });

  const port = await new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve((server.address() as { port: number }).port);
    });
  });

  const knownHostsFile = join(dir, "known_hosts");
  const publicLines = hostKeys.map((k) => `[127.0.0.1]:${port} ${publicKeyLine(parsedKey(k))}\n`);
  writeFileSync(knownHostsFile, publicLines.join(""), { mode: 0o600 });

  let closing: Promise<void> | undefined;
  return {
    host: "127.0.0.1",
    port,
    user,
    identityFile,
    knownHostsFile,
    dir,
    ptySupported,
    close: () => (closing ??= shutdown(server, connections, children, dir)),
  };
}

interface SessionContext {
  login: EmbeddedLogin;
  ptySupported: boolean;
  ttyDir: string;
  children: Set<ChildProcess>;
}

// ssh2 passes no accept/reject when the client asked for no reply, whatever its typings say.
function serveSession(session: Session, ctx: SessionContext): void {
  let pty: PtyInfo | undefined;
  let child: ChildProcess | undefined;
  let ttyFile: string | undefined;

  session.on("pty", (accept, reject, info) => {
    if (!ctx.ptySupported) {
      // The client sees only "refused"; say why on the server's side where someone may look.
      process.emitWarning("embedded SSH server refused a PTY request: PTYs are off here (they need util-linux script)");
      return reject?.();
    }
    pty = { rows: info.rows, cols: info.cols, term: info.term };
    accept?.();
  });
  session.on("window-change", (accept, _reject, info) => {
    if (pty) {
      pty = { ...pty, rows: info.rows, cols: info.cols };
      if (ttyFile) applyWindowSize(ttyFile, pty);
    }
    accept?.();
  });
  // Like an sshd without AcceptEnv: the runtime never depends on the login environment.
  session.on("env", (_accept, reject) => reject?.());
  session.on("shell", (_accept, reject) => reject?.());
  session.on("subsystem", (_accept, reject) => reject?.());
  session.on("sftp", (_accept, reject) => reject?.());
  session.on("signal", (accept, _reject, info) => {
    if (child?.pid !== undefined && child.exitCode === null) signalGroup(child.pid, `SIG${info.name}`);
    accept?.();
  });
  session.on("exec", (accept, reject, info) => {
    if (child) return reject?.();
    const stream = accept();
    if (pty) ttyFile = join(ctx.ttyDir, `tty-${process.hrtime.bigint()}`);
    child = runCommand(info.command, ctx.login, pty, ttyFile);
    ctx.children.add(child);
    if (pty && ttyFile) watchForTty(child, ttyFile, () => pty);
    wireChannel(stream, child, () => {
      ctx.children.delete(child!);
      if (ttyFile) rmSync(ttyFile, { force: true });
    });
  });
}

/** Runs the command string through /bin/sh as the login user, in its own process group. */
function runCommand(command: string, login: EmbeddedLogin, pty: PtyInfo | undefined, ttyFile: string | undefined): ChildProcess {
  const env = loginLikeEnv(login, pty?.term);
  const asOther = login.uid !== process.getuid?.() ? { uid: login.uid, gid: login.gid } : {};
  const options = { cwd: env.HOME, env, detached: true, stdio: "pipe" as const, ...asOther };
  if (!pty || !ttyFile) return spawn("/bin/sh", ["-c", command], options);
  // The size is set before the command starts; the tty name is published afterwards so a later
  // window-change can never be overwritten by the initial size.
  const inner = `stty rows ${pty.rows} cols ${pty.cols} && tty > ${shellQuote(ttyFile)} && exec /bin/sh -c ${shellQuote(command)}`;
  return spawn("script", ["-qfec", inner, "/dev/null"], options);
}

function wireChannel(stream: ServerChannel, child: ChildProcess, done: () => void): void {
  // The command may exit without reading its input, exactly as under sshd.
  child.stdin!.on("error", () => undefined);
  stream.on("error", () => undefined);
  stream.pipe(child.stdin!);
  child.stdout!.pipe(stream, { end: false });
  child.stderr!.pipe(stream.stderr, { end: false });
  // The channel gone while the command runs (the client closed it, or its connection dropped):
  // like sshd, close the command's pipes, so it reads EOF and a write fails (EPIPE/SIGPIPE).
  // Keeping them open kept e.g. a writer that never reads its stdin running until close().
  stream.once("close", () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.stdin!.destroy();
    child.stdout!.destroy();
    child.stderr!.destroy();
  });
  child.on("error", (err) => {
    stream.stderr.write(`embedded server: ${err.message}\n`);
    stream.exit(127);
    stream.end();
    done();
  });
  child.on("close", (code, signal) => {
    if (signal) stream.exit(signal.replace(/^SIG/, ""), false, "");
    else stream.exit(code ?? 1);
    stream.end();
    done();
  });
}

function loginLikeEnv(login: EmbeddedLogin, term: string | undefined): Record<string, string> {
  const { user, home } = login;
  // node's own directory first, so the runtime finds the same node it would on a real host.
  const path = [...new Set([dirname(process.execPath), "/usr/local/bin", "/usr/bin", "/bin"])].join(":");
  return { HOME: home, USER: user, LOGNAME: user, PATH: path, SHELL: "/bin/sh", ...(term ? { TERM: term } : {}) };
}

/** Polls (bounded by the child's life) for the tty name, then applies any size changed meanwhile. */
function watchForTty(child: ChildProcess, ttyFile: string, current: () => PtyInfo | undefined): void {
  const initial = current();
  const timer = setInterval(() => {
    if (child.exitCode !== null || child.signalCode !== null) return clearInterval(timer);
    if (!existsSync(ttyFile)) return;
    clearInterval(timer);
    const now = current();
    if (now && initial && (now.rows !== initial.rows || now.cols !== initial.cols)) applyWindowSize(ttyFile, now);
  }, 10);
  child.once("close", () => clearInterval(timer));
}

/**
 * Synchronous on purpose: ssh2 delivers channel messages in order, so input that follows a
 * window-change reaches the program only after the new size is in place. Setting the size on the
 * slave makes the kernel send SIGWINCH to the terminal's foreground process group.
 */
function applyWindowSize(ttyFile: string, pty: PtyInfo): void {
  if (!existsSync(ttyFile)) return;
  const tty = readFileSync(ttyFile, "utf8").trim();
  if (!tty.startsWith("/dev/")) return;
  spawnSync("stty", ["-F", tty, "rows", String(pty.rows), "cols", String(pty.cols)], { stdio: "ignore", timeout: 2_000 });
}

function hasUtilLinuxScript(): boolean {
  const probe = spawnSync("script", ["--version"], { encoding: "utf8", timeout: 2_000 });
  return probe.status === 0 && /util-linux/.test(probe.stdout);
}

function signalGroup(pid: number, signal: string): void {
  try {
    process.kill(-pid, signal as NodeJS.Signals);
  } catch {
    // The group is already gone, or the signal name is unknown to this OS: nothing to deliver.
  }
}

async function shutdown(server: Server, connections: Set<Connection>, children: Set<ChildProcess>, dir: string): Promise<void> {
  const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
  for (const client of connections) client.end();
  // Give commands a moment to finish on their own (their channel just closed), then kill.
  await waitFor(() => children.size === 0, CLOSE_GRACE_MS);
  for (const child of children) if (child.pid !== undefined) signalGroup(child.pid, "SIGKILL");
  await waitFor(() => children.size === 0, CLOSE_GRACE_MS);
  // A daemonized grandchild may still hold a pipe open; our side of it must not keep node alive.
  for (const child of children) for (const stream of child.stdio) stream?.destroy();
  await Promise.race([stopped, sleep(CLOSE_GRACE_MS)]);
  rmSync(dir, { recursive: true, force: true });
}

async function waitFor(done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done() && Date.now() < deadline) await sleep(20);
}

function sameBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** `ssh-ed25519 AAAA…` without any comment, as known_hosts wants it. */
function publicKeyLine(key: ParsedKey): string {
  return `${key.type} ${key.getPublicSSH().toString("base64")}`;
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
