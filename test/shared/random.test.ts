// src/shared/random.ts: the requested number of bytes as lowercase hex, different on every draw.
import { describe, expect, it } from "vitest";
import { randomHex } from "../../src/shared/random.js";

describe("randomHex", () => {
  it("draws the requested number of bytes, never the same twice", () => {
    const seen = new Set<string>();
    for (const n of [1, 6, 8, 16, 32, 1000]) {
      for (let i = 0; i < 50; i++) {
        const hex = randomHex(n);
        expect(hex).toMatch(new RegExp(`^[0-9a-f]{${2 * n}}$`));
        if (n >= 6) seen.add(hex);
      }
    }
    expect(seen.size).toBe(250);
  });
});
