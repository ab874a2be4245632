// known_hosts parsing and matching (pure logic; the real-sshd behaviour is in host-key.test.ts),
// plus the bootstrap command's shell-safety properties.
import { execFileSync } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { bootstrapCommand, installCommand, shellWord } from "../../src/transport/bootstrap.js";
import { fingerprint, hostLookupName, hostsFieldMatches, parseKnownHosts, verifyHostKey } from "../../src/transport/known-hosts.js";

function blob(type: string, body: string): Buffer {
  const t = Buffer.from(type);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(t.length);
  return Buffer.concat([len, t, Buffer.from(body)]);
}
const keyA = blob("ssh-ed25519", "A".repeat(32));
const keyB = blob("ssh-ed25519", "B".repeat(32));
const line = (hosts: string, key: Buffer, marker = "") => `${marker ? marker + " " : ""}${hosts} ssh-ed25519 ${key.toString("base64")}`;
const kh = (lines: string[]) => ({ file: "/kh", exists: true, entries: parseKnownHosts(lines.join("\n")) });

describe("known_hosts matching", () => {
  it("uses [host]:port only for non-22 ports", () => {
    expect(hostLookupName("h", 22)).toBe("h");
    expect(hostLookupName("h", 2222)).toBe("[h]:2222");
  });

  it("matches patterns, wildcards and negation", () => {
    expect(hostsFieldMatches("a,b,c", "b")).toBe(true);
    expect(hostsFieldMatches("*.example.com", "x.example.com")).toBe(true);
    expect(hostsFieldMatches("*.example.com", "example.com")).toBe(false);
    expect(hostsFieldMatches("host?", "host1")).toBe(true);
    expect(hostsFieldMatches("*,!bad", "bad")).toBe(false);
    expect(hostsFieldMatches("[h]:2222", "[h]:2222")).toBe(true);
    expect(hostsFieldMatches("h", "[h]:2222")).toBe(false);
    expect(hostsFieldMatches("a.b", "aXb")).toBe(false);
  });

  it("matches hashed entries", () => {
    const salt = randomBytes(20);
    const hash = createHmac("sha1", salt).update("[h]:2222").digest();
    const field = `|1|${salt.toString("base64")}|${hash.toString("base64")}`;
    expect(hostsFieldMatches(field, "[h]:2222")).toBe(true);
    expect(hostsFieldMatches(field, "h")).toBe(false);
  });

  it("skips comments, blank lines and unknown markers", () => {
    const entries = parseKnownHosts(
      ["# c", "", "@weird h ssh-ed25519 AAAA", line("h", keyA), "  ", line("h", keyB, "@revoked")].join("\n"),
    );
    expect(entries.map((e) => [e.marker, e.line])).toEqual([
      ["", 4],
      ["@revoked", 6],
    ]);
  });

  it("classifies accepted, changed, unknown, revoked and cert-authority-only", () => {
    expect(verifyHostKey(kh([line("h", keyA)]), "h", 22, keyA).ok).toBe(true);
    expect(verifyHostKey(kh([line("h", keyB)]), "h", 22, keyA).error?.message).toContain("CHANGED");
    expect(verifyHostKey(kh([line("other", keyA)]), "h", 22, keyA).error?.message).toMatch(/^Unknown host key for h:/);
    expect(verifyHostKey(kh([line("h", keyA), line("*", keyA, "@revoked")]), "h", 22, keyA).error?.message).toContain("REVOKED");
    expect(verifyHostKey(kh([line("h", keyB, "@cert-authority")]), "h", 22, keyA).error?.message).toContain("not supported");
    const v = verifyHostKey({ file: "/none", exists: false, entries: [] }, "h", 2200, keyA);
    expect(v.error?.errorClass).toBe("host-key");
    expect(v.error?.message).toContain("/none does not exist");
    expect(v.error?.message).toContain("ssh-keyscan -p 2200 h >> /none");
    expect(v.fingerprint).toBe(fingerprint(keyA));
    expect(v.fingerprint).not.toContain("=");
  });
});

describe("bootstrap command", () => {
  const hash = "0123456789abcdef";
  it("passes hostile roots through sh as one word", () => {
    for (const root of ["/tmp/a b", "/tmp/it's", "/tmp/$HOME", "/tmp/`id`", '/tmp/"q"', "~/x;y", "/tmp/*"]) {
      const out = execFileSync("/bin/sh", ["-c", `${shellWord(root)}`.replace(/^/, "printf %s ")]).toString();
      expect(out).toBe(root);
    }
  });

  it("is one line without characters that break in fish or csh", () => {
    for (const cmd of [bootstrapCommand("~/.paseo-ssh", undefined, hash, ["pty", "tok"]), installCommand("/srv/p", hash, 42)]) {
      expect(cmd).not.toMatch(/[\n\\]/);
      expect(cmd).toMatch(/^exec \/bin\/sh -c '/);
    }
    expect(() => shellWord("a\\b")).toThrow();
    expect(() => shellWord("a!1")).toThrow();
    expect(() => bootstrapCommand("/r", undefined, "../../etc")).toThrow();
  });
});
