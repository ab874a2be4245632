// What every part of the wire contract (docs/contract.md#schemas) builds on: the protocol version,
// the open maps, small field types and the discriminated-union helper whose error text Paseo's tests
// match. The schemas are split by who needs them (exec-schemas.ts, lifecycle-schemas.ts,
// schemas.ts) so a process constructs only the zod schemas of its own operation: each one costs
// start-up time.
import * as z from "./zod-mini.js";

/** zod's discriminated unions name the valid tags in this exact text, which Paseo's tests match. */
export function discriminated<
  const K extends string,
  const T extends readonly [z.core.$ZodTypeDiscriminable, ...z.core.$ZodTypeDiscriminable[]],
>(key: K, options: T, tags: readonly string[]) {
  const expected = tags.map((tag) => `'${tag}'`).join(" | ");
  return z.discriminatedUnion(key, options, {
    error: (issue) =>
      issue.code === "invalid_union" && issue.note === "No matching discriminator"
        ? `Invalid discriminator value. Expected ${expected}`
        : undefined,
  });
}

// ---- primitives -------------------------------------------------------------------------

export const ProtocolVersionSchema = z.literal(1);
export const EnvironmentSchema = z.record(z.string(), z.string());
export const OptionsSchema = z.record(z.string(), z.json());
export const nonEmpty = z.string().check(z.minLength(1));
export const positiveInt = z.int().check(z.positive());
export const nonNegativeInt = z.int().check(z.nonnegative());
