// Canonical encoding (docs/contract.md#encoding) and strict validation with one-line messages. Every message we
// write goes through `encodeCanonical`; every message we read goes through `parseJsonText` and
// `validateMessage`, so the byte rules and the error texts live in one place.
import * as z from "./zod-mini.js";
import { RuntimeError, type ErrorClass } from "../shared/errors.js";

/** `input.placement: Unrecognized key: "root"`; several issues are joined with `; `. */
export function formatIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((issue) => {
      const path = issue.path.map((part, i) => (typeof part === "number" ? `[${part}]` : `${i === 0 ? "" : "."}${String(part)}`)).join("");
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join("; ");
}

/**
 * Strictly validates `value`; on failure throws RuntimeError(errorClass, `<prefix><issues>`).
 * The parsed output is rebuilt in schema field order with defaults filled in.
 */
export function validateMessage<S extends z.core.$ZodType>(
  schema: S,
  value: unknown,
  prefix = "",
  errorClass: ErrorClass = "input",
): z.output<S> {
  const result = z.safeParse(schema, value);
  if (!result.success) throw new RuntimeError(errorClass, `${prefix}${formatIssues(result.error.issues)}`);
  return result.data;
}

/**
 * Canonical bytes of one message: validated, keys in schema order, undefined optionals omitted,
 * defaults materialised, `JSON.stringify` spacing and escaping, exactly one trailing `\n`.
 * An invalid outgoing message is our bug, so it fails as a `remote` (internal) error.
 */
export function encodeCanonical<S extends z.core.$ZodType>(schema: S, value: z.input<S>): string {
  const canonical = validateMessage(schema, value, "Refusing to write an invalid message: ", "remote");
  return `${JSON.stringify(canonical)}\n`;
}

/**
 * `JSON.parse` (a malformed text throws the native SyntaxError, as Paseo's decoder does), refusing
 * `__proto__` keys: object parsing would silently drop them or turn them into prototypes.
 */
export function parseJsonText(text: string): unknown {
  if (!text.includes("__proto__")) return JSON.parse(text);
  return JSON.parse(text, (key, value: unknown) => {
    if (key === "__proto__") throw new RuntimeError("input", 'JSON key "__proto__" is not accepted');
    return value;
  });
}
