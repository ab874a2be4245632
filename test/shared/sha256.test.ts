// src/shared/sha256.ts against node:crypto: every message length across the padding boundaries
// (55, 56, 63, 64 bytes and their neighbours), random bytes, multi-byte UTF-8 text, long inputs.
import { createHash, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/shared/sha256.js";

const reference = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex");

describe("sha256Hex", () => {
  it("matches node:crypto for every length from 0 to 300 bytes", () => {
    for (let n = 0; n <= 300; n++) {
      const data = randomBytes(n);
      expect({ n, digest: sha256Hex(data) }).toEqual({ n, digest: reference(data) });
    }
  });

  it("hashes a string as its UTF-8 bytes", () => {
    for (const text of ["", "abc", "héllo – ✓ 𝄞", '{"version":"1-0123456789abcdef","root":"~/.paseo-ssh"}']) {
      expect(sha256Hex(text)).toBe(reference(text));
    }
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  it("matches node:crypto for long inputs", () => {
    for (const n of [1000, 65_536, 1_000_003]) {
      const data = randomBytes(n);
      expect(sha256Hex(data)).toBe(reference(data));
    }
  });
});
