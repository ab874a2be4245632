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
 * Arrays and objects nested deeper than this are refused before parsing: validation (z.json()) and
 * everything after it recurse per level, and a peer's 5,000 levels exhausted the stack.
 */
export const MAX_JSON_DEPTH = 64;

/** Whether `text` opens more than `max` arrays or objects inside one another (outside strings). */
function nestedDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/**
 * `JSON.parse` (a malformed text throws the native SyntaxError, as Paseo's decoder does), refusing
 * `__proto__` keys: object parsing would silently drop them or turn them into prototypes. Nesting
 * beyond MAX_JSON_DEPTH is a SyntaxError too, so it reads as the malformed input it is.
 */
export function parseJsonText(text: string): unknown {
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) throw new SyntaxError(`nested deeper than ${MAX_JSON_DEPTH} levels`);
  if (!text.includes("__proto__")) return JSON.parse(text);
  return JSON.parse(text, (key, value: unknown) => {
    if (key === "__proto__") throw new RuntimeError("input", 'JSON key "__proto__" is not accepted');
    return value;
  });
}
