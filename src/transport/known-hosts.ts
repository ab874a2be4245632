// Strict host-key checking against an OpenSSH known_hosts file, done before any authentication.
// We never trust on first use: an unknown or changed key is an error telling the user how to
// verify and add the key themselves. Supports plain and hashed (|1|salt|hmac) host fields,
// comma-separated patterns with `*`/`?` wildcards and `!` negation, `[host]:port`, and the
// @revoked marker; @cert-authority lines are recognised but not supported.
import { createHash, createHmac } from "node:crypto";
import { appendFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { RuntimeError } from "../shared/errors.js";

export interface KnownHostEntry {
  /** The file it was read from, when several are consulted. */
  file?: string;
  marker: "" | "@revoked" | "@cert-authority";
  hosts: string;
  keyType: string;
  key: Buffer;
  line: number;
}

export interface KnownHosts {
  /** The first (user) file: where a new key would be added. */
  file: string;
  /** False when no file exists (every host is then unknown). */
  exists: boolean;
  entries: KnownHostEntry[];
  /** Every file that exists, in lookup order (messages name them). */
  existing?: string[];
}

/** User files then global ones, as ssh consults them; the first user file is where keys go. */
export function loadKnownHostsFiles(files: string[]): KnownHosts {
  const loaded = files.map(loadKnownHosts);
  const present = loaded.filter((k) => k.exists);
  return {
    file: files[0] ?? "~/.ssh/known_hosts",
    exists: present.length > 0,
    entries: present.flatMap((k) => k.entries.map((e) => ({ ...e, file: k.file }))),
    existing: present.map((k) => k.file),
  };
}

/** Records a host key (StrictHostKeyChecking accept-new with the runtime's opt-in), as ssh adds it. */
export function recordHostKey(file: string, name: string, offered: Buffer): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  appendFileSync(file, `${name} ${keyBlobType(offered)} ${offered.toString("base64")}\n`, { mode: 0o600 });
}

export function loadKnownHosts(file: string): KnownHosts {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { file, exists: false, entries: [] };
    throw new RuntimeError("host-key", `Cannot read known_hosts file ${file}: ${(err as Error).message}`);
  }
  return { file, exists: true, entries: parseKnownHosts(text) };
}

export function parseKnownHosts(text: string): KnownHostEntry[] {
  const entries: KnownHostEntry[] = [];
  text.split("\n").forEach((raw, i) => {
    const fields = raw.trim().split(/\s+/);
    if (fields[0] === "" || fields[0]!.startsWith("#")) return;
    let marker: KnownHostEntry["marker"] = "";
    if (fields[0]!.startsWith("@")) {
      if (fields[0] !== "@revoked" && fields[0] !== "@cert-authority") return;
      marker = fields.shift() as KnownHostEntry["marker"];
    }
    const [hosts, keyType, b64] = fields;
    if (!hosts || !keyType || !b64) return;
    entries.push({ marker, hosts, keyType, key: Buffer.from(b64, "base64"), line: i + 1 });
  });
  return entries;
}

/** The name OpenSSH looks up: `host` on port 22, `[host]:port` otherwise. */
export function hostLookupName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

function globToRegExp(pattern: string): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${body}$`, "i");
}

function hashedMatch(field: string, name: string): boolean {
  const parts = field.split("|");
  if (parts.length !== 4 || parts[1] !== "1") return false;
  const salt = Buffer.from(parts[2]!, "base64");
  const want = Buffer.from(parts[3]!, "base64");
  const got = createHmac("sha1", salt).update(name).digest();
  return got.length === want.length && got.equals(want);
}

/** Whether an entry's host field applies to `name` (a negated pattern vetoes the whole line). */
export function hostsFieldMatches(hosts: string, name: string): boolean {
  if (hosts.startsWith("|")) return hashedMatch(hosts, name);
  let matched = false;
  for (const pattern of hosts.split(",")) {
    if (pattern === "") continue;
    if (pattern.startsWith("!")) {
      if (globToRegExp(pattern.slice(1)).test(name)) return false;
    } else if (globToRegExp(pattern).test(name)) {
      matched = true;
    }
  }
  return matched;
}

/** Key type name from an SSH public key blob (its first length-prefixed string). */
export function keyBlobType(blob: Buffer): string {
  if (blob.length < 4) return "unknown";
  const len = blob.readUInt32BE(0);
  return blob.subarray(4, 4 + len).toString("latin1");
}

/** OpenSSH's fingerprint format: `SHA256:` + unpadded base64 of sha256(blob). */
export function fingerprint(blob: Buffer): string {
  return "SHA256:" + createHash("sha256").update(blob).digest("base64").replace(/=+$/, "");
}

export interface HostKeyVerdict {
  ok: boolean;
  /** Set when !ok because the host has no key at all in the files (accept-new may add one). */
  unknown?: boolean;
  /** The name looked up (HostKeyAlias, `host` or `[host]:port`). */
  name?: string;
  /** The entry that matched, for doctor: `file line N`. */
  matched?: string;
  /** Set when !ok: the error to report (class host-key). */
  error?: RuntimeError;
  keyType: string;
  fingerprint: string;
}

/** Checks the key the server offered; never throws, the caller decides when to report. */
export function verifyHostKey(kh: KnownHosts, host: string, port: number, offered: Buffer, hostKeyAlias?: string): HostKeyVerdict {
  // With HostKeyAlias, ssh looks the alias up without a port.
  const name = hostKeyAlias ?? hostLookupName(host, port);
  const at = (e: KnownHostEntry) => `${e.file ?? kh.file} line ${e.line}`;
  const keyType = keyBlobType(offered);
  const fp = fingerprint(offered);
  const offeredDesc = `${keyType} key ${fp}`;
  const scan = hostKeyAlias ? `ssh-keyscan -p ${port} ${host} | sed 's/^[^ ]*/${hostKeyAlias}/'` : `ssh-keyscan -p ${port} ${host}`;
  const addHint = `after verifying that fingerprint out of band, add the key with: ${scan} >> ${kh.file}`;
  const fail = (message: string): HostKeyVerdict => ({ ok: false, error: new RuntimeError("host-key", message), keyType, fingerprint: fp });

  // A revoked key is refused whatever host pattern it was listed under.
  const revoked = kh.entries.find((e) => e.marker === "@revoked" && e.key.equals(offered));
  if (revoked) {
    return fail(
      `Host key for ${name} is REVOKED: the server offered ${offeredDesc}, marked @revoked in ${at(revoked)}; refusing to connect`,
    );
  }
  const forHost = kh.entries.filter((e) => e.marker !== "@revoked" && hostsFieldMatches(e.hosts, name));
  const plain = forHost.filter((e) => e.marker === "");
  const good = plain.find((e) => e.key.equals(offered));
  if (good) return { ok: true, keyType, fingerprint: fp, name, matched: at(good) };

  const sameType = plain.filter((e) => e.keyType === keyType);
  if (sameType.length > 0) {
    return fail(
      `Host key for ${name} has CHANGED (possible man-in-the-middle): the server offered ${offeredDesc}, ` +
        `but ${at(sameType[0]!)} holds a different ${keyType} key; if the change is legitimate, ` +
        `remove the old entry (ssh-keygen -R "${name}" -f ${sameType[0]!.file ?? kh.file}) and, ${addHint}`,
    );
  }
  if (plain.length > 0) {
    const types = [...new Set(plain.map((e) => e.keyType))].join(", ");
    return fail(
      `Host key for ${name} is not known for type ${keyType}: the server offered ${offeredDesc}; ${kh.file} only has ${types} keys for it; ${addHint}`,
    );
  }
  if (forHost.some((e) => e.marker === "@cert-authority")) {
    return fail(
      `Host key for ${name} is not trusted: the server offered ${offeredDesc}; ${kh.file} only has @cert-authority entries for it, ` +
        `which are not supported; ${addHint}`,
    );
  }
  const where = kh.exists ? `which is not in ${(kh.existing ?? [kh.file]).join(", ")}` : `and ${kh.file} does not exist`;
  return { ...fail(`Unknown host key for ${name}: the server offered ${offeredDesc}, ${where}; ${addHint}`), unknown: true, name };
}

/** Key types known for a host, so the handshake can ask for one we can actually verify. */
export function knownKeyTypes(kh: KnownHosts, host: string, port: number, hostKeyAlias?: string): string[] {
  const name = hostKeyAlias ?? hostLookupName(host, port);
  return [...new Set(kh.entries.filter((e) => e.marker === "" && hostsFieldMatches(e.hosts, name)).map((e) => e.keyType))];
}
