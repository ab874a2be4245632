// ssh_config evaluation for machines without the `ssh` binary, and the source of "which line set
// this" for doctor. Lines are parsed by the maintained `ssh-config` package; what happens with
// them follows OpenSSH's readconf.c: the first value wins (IdentityFile/CertificateFile add up),
// Host patterns match the name as given (with `!` negation vetoing the block), Match evaluates
// its criteria in order and runs `exec` only while the earlier criteria held, Include takes globs
// and paths relative to ~/.ssh (user files) or /etc/ssh (system file) and never lets an included
// Match change the includer's state, `Match final` re-reads the files for the final host name.
import { readFileSync, statSync } from "node:fs";
import { globSync } from "tinyglobby";
import { isAbsolute } from "node:path";
import { RuntimeError } from "../../shared/errors.js";
import type { Dump, Evaluated, Source } from "./dump.js";
import { defaultTokens, expandTilde, expandTokens, type LocalIdentity } from "./tokens.js";
import { matchPattern, matchPatternList } from "./pattern.js";
import { SSH_G_TIMEOUT_MS, SYSTEM_CONFIG, type EvalRequest } from "./ssh-g.js";

const MAX_INCLUDE_DEPTH = 16;
/** OpenSSH's default identities, in its order (used when no IdentityFile applies). */
const DEFAULT_IDENTITIES = ["id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_xmss", "id_dsa"];
const ACCUMULATING = new Set(["identityfile", "certificatefile"]);

/**
 * Keywords whose value OpenSSH takes as the rest of the line, verbatim: a shell command. The
 * package splits it into words, dropping a lone `=` and the double quotes, so `test "$X" = y` came
 * back as `test "$X" y`; their value is read from the line itself instead.
 */
const COMMAND_KEYWORDS = new Set(["proxycommand", "localcommand", "remotecommand", "knownhostscommand"]);

/** The rest of `text` after its keyword and the optional `=` (OpenSSH's `Keyword[ =]value`). */
function restOfLine(text: string): string {
  return text.replace(/^\s*\S+?(?:\s*=\s*|\s+)/, "").trimEnd();
}

interface Line {
  keyword: string;
  /** The words after the keyword (quotes removed), as the package split them. */
  args: string[];
  /** The value as one string, for keywords that take the rest of the line. */
  raw: string;
  source: Source;
}

type Directive = { param: string; value: unknown; before: string; after: string; config?: unknown[]; type: number };

function valueWords(value: unknown): Array<{ val: string; quoted?: boolean; separator: string }> {
  if (typeof value === "string") return value === "" ? [] : [{ val: value, separator: "" }];
  return value as Array<{ val: string; quoted?: boolean; separator: string }>;
}

/** Flattens the package's Host/Match nesting back into file order, with 1-based line numbers. */
async function readLines(file: string, text: string): Promise<Line[]> {
  const { parse } = await import("ssh-config");
  const fileLines = text.split("\n");
  let parsed: Directive[];
  try {
    parsed = parse(text) as unknown as Directive[];
  } catch (err) {
    throw new RuntimeError("input", `ssh_config ${file} cannot be parsed: ${(err as Error).message}`);
  }
  const out: Line[] = [];
  let line = 1;
  const walk = (nodes: Directive[]) => {
    for (const node of nodes) {
      line += (node.before.match(/\n/g) ?? []).length;
      if (node.type === 1 && node.param) {
        const words = valueWords(node.value);
        const keyword = node.param.toLowerCase();
        const raw = COMMAND_KEYWORDS.has(keyword)
          ? restOfLine(fileLines[line - 1] ?? "")
          : words.map((w, i) => `${i === 0 ? "" : w.separator}${w.quoted ? `"${w.val}"` : w.val}`).join("");
        const text = `${node.param} ${raw}`.trim();
        out.push({ keyword, args: words.map((w) => w.val), raw, source: { file, line, text } });
      }
      line += (node.after.match(/\n/g) ?? []).length;
      if (Array.isArray(node.config)) walk(node.config as Directive[]);
    }
  };
  walk(parsed);
  return out;
}

interface Flags {
  user: boolean;
  checkPerm: boolean;
  neverMatch: boolean;
}

/** Which pass reads: the first (the name as given), or `Match final`'s re-read for the final host name. */
interface Pass {
  final: boolean;
  host: string;
}

/** Where a read stands: its pass, the Host/Match state it shares with its includer, its Include depth. */
interface ReadState {
  pass: Pass;
  active: { on: boolean };
  depth: number;
}

class Evaluation {
  readonly values = new Map<string, string>();
  readonly lists = new Map<string, string[]>();
  readonly sources = new Map<string, Source[]>();
  wantFinal = false;

  constructor(
    private readonly req: EvalRequest,
    private readonly local: LocalIdentity,
    private readonly runExec: boolean,
  ) {
    // Explicit values are set first, so they win as `ssh -o` values do.
    if (req.user !== undefined) this.values.set("user", req.user);
    if (req.port !== undefined) this.values.set("port", String(req.port));
    if (req.proxyJump !== undefined) this.values.set("proxyjump", req.proxyJump);
  }

  private set(line: Line): void {
    const k = line.keyword;
    if (ACCUMULATING.has(k)) {
      const list = this.lists.get(k) ?? [];
      // OpenSSH ignores a repeated identity/certificate path.
      if (!list.includes(line.raw)) {
        list.push(line.raw);
        this.lists.set(k, list);
        this.sources.set(k, [...(this.sources.get(k) ?? []), line.source]);
      }
      return;
    }
    if (k === "proxycommand" && this.values.has("proxyjump")) return;
    if (k === "proxyjump" && (this.values.has("proxycommand") || this.values.has("proxyjump"))) return;
    if (this.values.has(k)) return;
    this.values.set(k, line.raw);
    this.sources.set(k, [line.source]);
  }

  /** The host name Match host compares: HostName (with %h) once set, else the name as given. */
  private matchHost({ final, host }: Pass): string {
    if (final) return host;
    const hn = this.values.get("hostname");
    return hn !== undefined ? hn.replace(/%h/g, this.req.alias) : this.req.alias;
  }

  private matchLine(args: string[], pass: Pass, source: Source): boolean {
    const { final } = pass;
    let result = true;
    let attributes = 0;
    const ruser = this.values.get("user") ?? this.local.name;
    for (let i = 0; i < args.length; i++) {
      let attr = args[i]!.toLowerCase();
      const negate = attr.startsWith("!");
      if (negate) attr = attr.slice(1);
      if (attr === "all") return negate ? false : result;
      attributes++;
      if (attr === "canonical" || attr === "final") {
        if (attr === "final") this.wantFinal = true;
        if (final === negate) result = false;
        continue;
      }
      const arg = args[++i];
      if (arg === undefined) throw new RuntimeError("input", `${source.file} line ${source.line}: Match ${attr} needs a value`);
      let r: boolean;
      const h = this.matchHost(pass);
      switch (attr) {
        case "host":
          r = matchPatternList(h.toLowerCase(), arg, "lowercase") === 1;
          break;
        case "originalhost":
          r = matchPatternList(this.req.alias.toLowerCase(), arg, "lowercase") === 1;
          break;
        case "user":
          r = matchPatternList(ruser, arg, "as-written") === 1;
          break;
        case "localuser":
          r = matchPatternList(this.local.name, arg, "as-written") === 1;
          break;
        case "exec": {
          // OpenSSH skips the command once an earlier criterion on the line has failed.
          if (!result) continue;
          const port = Number(this.values.get("port") ?? 22);
          const tokens = defaultTokens(
            { alias: this.req.alias, host: h, port, user: ruser, keyAlias: this.values.get("hostkeyalias") ?? h },
            this.local,
          );
          r = this.exec(expandTokens("Match exec", arg, tokens, { envVars: false }), source);
          break;
        }
        default:
          throw new RuntimeError("input", `${source.file} line ${source.line}: unsupported Match attribute ${attr}`);
      }
      if (r === negate) result = false;
    }
    if (attributes === 0) throw new RuntimeError("input", `${source.file} line ${source.line}: Match needs one or more attributes`);
    return result;
  }

  private exec(command: string, source: Source): boolean {
    if (!this.runExec) throw new RuntimeError("input", `${source.file} line ${source.line}: Match exec is not evaluated here`);
    const shell = process.env.SHELL || "/bin/sh";
    // node:child_process is loaded only here, as in tokens.ts for node:crypto: without an ssh
    // binary every operation evaluates ssh_config here, and few configurations use Match exec.
    const { spawnSync } =
      process.getBuiltinModule?.("node:child_process") ?? (require("node:child_process") as typeof import("node:child_process"));
    const r = spawnSync(shell, ["-c", command], { stdio: ["ignore", "ignore", "ignore"], timeout: SSH_G_TIMEOUT_MS });
    if (r.error) throw new RuntimeError("input", `${source.file} line ${source.line}: Match exec "${command}" failed: ${r.error.message}`);
    return r.status === 0;
  }

  async readFile(file: string, flags: Flags, state: ReadState): Promise<boolean> {
    const { active, depth, pass } = state;
    const { host } = pass;
    if (depth > MAX_INCLUDE_DEPTH) throw new RuntimeError("input", `ssh_config: too many nested Include levels at ${file}`);
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw new RuntimeError("input", `Cannot read ssh_config ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    if (flags.checkPerm) {
      const st = statSync(file);
      if ((st.uid !== 0 && st.uid !== process.getuid?.()) || (st.mode & 0o022) !== 0) {
        throw new RuntimeError("input", `Bad owner or permissions on ssh_config ${file} (must be yours or root's, not writable by others)`);
      }
    }
    for (const line of await readLines(file, text)) {
      switch (line.keyword) {
        case "host": {
          active.on = false;
          if (flags.neverMatch) break;
          for (const pattern of line.args) {
            const negated = pattern.startsWith("!");
            if (!matchPattern(host, negated ? pattern.slice(1) : pattern)) continue;
            if (negated) {
              active.on = false;
              break;
            }
            active.on = true;
          }
          break;
        }
        case "match": {
          const value = this.matchLine(line.args, pass, line.source);
          active.on = flags.neverMatch ? false : value;
          break;
        }
        case "include":
          await this.include(line, flags, state);
          break;
        default:
          if (active.on) this.set(line);
      }
    }
    return true;
  }

  private async include(line: Line, flags: Flags, state: ReadState): Promise<void> {
    const { active } = state;
    for (const arg of line.args) {
      if (arg.startsWith("~") && !flags.user) {
        throw new RuntimeError("input", `${line.source.file} line ${line.source.line}: bad include path ${arg}`);
      }
      const anchored = isAbsolute(arg) || arg.startsWith("~") ? arg : `${flags.user ? "~/.ssh" : "/etc/ssh"}/${arg}`;
      // glob(3) returns its matches sorted, as OpenSSH reads them.
      const matches = globSync(expandTilde(anchored, this.local), { absolute: true, onlyFiles: true, expandDirectories: false }).sort();
      const outer = active.on;
      for (const file of matches) {
        await this.readFile(
          file,
          { user: flags.user, checkPerm: true, neverMatch: flags.neverMatch || !outer },
          { ...state, depth: state.depth + 1 },
        );
        // An included Match must not change the including file's state.
        active.on = outer;
      }
    }
  }

  /** What `ssh -G` prints for the keywords we read, after OpenSSH's defaults. */
  dump(host: string): Dump {
    const v = this.values;
    const d: Dump = new Map();
    const put = (k: string, value: string | undefined) => value !== undefined && d.set(k, [value]);
    const hostname = v.has("hostname") ? v.get("hostname")!.replace(/%h/g, this.req.alias) : this.req.alias;
    put("hostname", isAddress(hostname) ? hostname : hostname.toLowerCase());
    put("user", v.get("user") ?? this.local.name);
    put("port", v.get("port") ?? "22");
    const ids = this.lists.get("identityfile") ?? DEFAULT_IDENTITIES.map((f) => `~/.ssh/${f}`);
    d.set("identityfile", ids);
    put("identitiesonly", yesNo(v.get("identitiesonly")) ?? "no");
    if (v.has("identityagent")) put("identityagent", v.get("identityagent"));
    put("userknownhostsfile", v.get("userknownhostsfile") ?? "~/.ssh/known_hosts ~/.ssh/known_hosts2");
    put("globalknownhostsfile", v.get("globalknownhostsfile") ?? "/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2");
    if (v.has("hostkeyalias")) put("hostkeyalias", v.get("hostkeyalias")!.toLowerCase());
    put("stricthostkeychecking", strictValue(v.get("stricthostkeychecking")));
    put("serveraliveinterval", String(seconds(v.get("serveraliveinterval")) ?? 0));
    put("serveralivecountmax", v.get("serveralivecountmax") ?? "3");
    const ct = seconds(v.get("connecttimeout"));
    put("connecttimeout", ct === undefined ? "none" : String(ct));
    const jump = v.get("proxyjump");
    if (jump !== undefined && jump.toLowerCase() !== "none") put("proxyjump", printedJump(jump));
    else if (v.has("proxycommand")) put("proxycommand", v.get("proxycommand"));
    if (this.lists.has("certificatefile")) d.set("certificatefile", this.lists.get("certificatefile")!);
    put("proxyusefdpass", jump === undefined ? (yesNo(v.get("proxyusefdpass")) ?? "no") : "no");
    put("pkcs11provider", v.get("pkcs11provider"));
    put("pubkeyauthentication", v.get("pubkeyauthentication") ?? "yes");
    put("preferredauthentications", v.get("preferredauthentications"));
    void host;
    return d;
  }

  /** The final host name, as the final pass and Host lines of that pass see it. */
  finalHost(): string {
    return this.dump("").get("hostname")![0]!;
  }
}

function isAddress(h: string): boolean {
  return /^[0-9.]+$/.test(h) || h.includes(":");
}

function yesNo(v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  return /^(yes|true)$/i.test(v) ? "yes" : "no";
}

function strictValue(v: string | undefined): string {
  if (v === undefined) return "ask";
  const l = v.toLowerCase();
  if (l === "yes" || l === "true") return "true";
  if (l === "no" || l === "off" || l === "false") return "false";
  return l;
}

/** OpenSSH convtime: plain seconds or 1h30m-style; "none" and absent are undefined. */
function seconds(v: string | undefined): number | undefined {
  if (v === undefined || v.toLowerCase() === "none") return undefined;
  const units: Record<string, number> = { "": 1, s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
  let total = 0;
  for (const m of v.toLowerCase().matchAll(/(\d+)([smhdw]?)/g)) total += Number(m[1]) * units[m[2]!]!;
  return total;
}

/** ProxyJump as `ssh -G` prints it: the last hop re-assembled, numeric hosts bracketed. */
function printedJump(value: string): string {
  const comma = value.lastIndexOf(",");
  const extra = comma >= 0 ? value.slice(0, comma) : undefined;
  const { user, host, port } = parseJumpSpec(value.slice(comma + 1));
  const numeric = host.includes(":") || /^[0-9.]+$/.test(host);
  return `${extra !== undefined ? `${extra},` : ""}${user !== undefined ? `${user}@` : ""}${numeric ? `[${host}]` : host}${port !== undefined ? `:${port}` : ""}`;
}

/** One ProxyJump element: `[user@]host[:port]`, `[user@][addr]:port` or `ssh://[user@]host[:port]`. */
export function parseJumpSpec(spec: string): { user?: string; host: string; port?: number } {
  const s = spec.replace(/^ssh:\/\//i, "").replace(/\/$/, "");
  const m = /^(?:([^@]+)@)?(\[[^\]]+\]|[^:@[\]]+)(?::(\d{1,5}))?$/.exec(s);
  if (!m) throw new RuntimeError("input", `ssh_config ProxyJump "${spec}" is not [user@]host[:port]`);
  return {
    ...(m[1] !== undefined ? { user: m[1] } : {}),
    host: m[2]!.replace(/^\[(.*)\]$/, "$1"),
    ...(m[3] !== undefined ? { port: Number(m[3]) } : {}),
  };
}

/** The files ssh reads: the given one only, or ~/.ssh/config (if any) then the system file. */
export function configFiles(file: string | null, local: LocalIdentity): Array<{ path: string; flags: Flags }> {
  if (file !== null) return [{ path: file, flags: { user: true, checkPerm: false, neverMatch: false } }];
  return [
    { path: `${local.home}/.ssh/config`, flags: { user: true, checkPerm: true, neverMatch: false } },
    { path: SYSTEM_CONFIG, flags: { user: false, checkPerm: false, neverMatch: false } },
  ];
}

/**
 * Evaluates the config the way `ssh -G` does. `runExec` false refuses `Match exec` instead of
 * running it (doctor's provenance pass reuses what ssh already decided).
 */
export async function evaluateConfig(req: EvalRequest, local: LocalIdentity, runExec = true): Promise<Evaluated> {
  const ev = new Evaluation(req, local, runExec);
  const files = configFiles(req.file, local);
  for (const { path, flags } of files) {
    const found = await ev.readFile(path, flags, { pass: { final: false, host: req.alias }, active: { on: true }, depth: 0 });
    if (!found && req.file !== null) throw new RuntimeError("input", `ssh_config file ${path} does not exist`);
  }
  if (ev.wantFinal) {
    const host = ev.finalHost();
    ev.values.set("hostname", host);
    for (const { path, flags } of files) await ev.readFile(path, flags, { pass: { final: true, host }, active: { on: true }, depth: 0 });
  }
  return { dump: ev.dump(req.alias), sources: ev.sources, via: "parser" };
}
