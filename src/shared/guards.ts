// Structural checks for JSON that crossed a process boundary (agent messages, requests, records).
// The agent bundle may use Node built-ins only, so this is not zod: a handful of composable type
// guards whose result type the compiler checks against the protocol's declared interfaces.

export type Guard<T> = (value: unknown) => value is T;

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export const isString: Guard<string> = (v): v is string => typeof v === "string";
export const isBoolean: Guard<boolean> = (v): v is boolean => typeof v === "boolean";
export const isNumber: Guard<number> = (v): v is number => typeof v === "number" && Number.isFinite(v);
export const isInteger: Guard<number> = (v): v is number => Number.isSafeInteger(v);

/** Sizes, counts and ids that must be whole and at least 1 (PTY rows/cols, resize ids). */
export const isPositiveInt: Guard<number> = (v): v is number => Number.isSafeInteger(v) && (v as number) >= 1;

/** A terminal dimension as a kernel takes it (TIOCSWINSZ holds an unsigned short): larger ones are clamped. */
export const MAX_WINDOW_DIMENSION = 65535;
export function windowDimension(n: number): number {
  return Math.min(n, MAX_WINDOW_DIMENSION);
}

export function literal<const T extends string | number | boolean | null>(...values: T[]): Guard<T> {
  return (v): v is T => values.includes(v as T);
}

export function nullable<T>(guard: Guard<T>): Guard<T | null> {
  return (v): v is T | null => v === null || guard(v);
}

/** A field that may be absent (or undefined). */
export function optional<T>(guard: Guard<T>): Guard<T | undefined> {
  return (v): v is T | undefined => v === undefined || guard(v);
}

export function arrayOf<T>(guard: Guard<T>): Guard<T[]> {
  return (v): v is T[] => Array.isArray(v) && v.every(guard);
}

export function recordOf<T>(guard: Guard<T>): Guard<Record<string, T>> {
  return (v): v is Record<string, T> => isRecord(v) && Object.values(v).every(guard);
}

type Shape = Record<string, Guard<unknown>>;
type Checked<S extends Shape> = { [K in keyof S]: S[K] extends Guard<infer T> ? T : never };

/** An object whose listed fields pass their guards; unlisted fields are tolerated. */
export function object<S extends Shape>(shape: S): Guard<Checked<S>> {
  const entries = Object.entries(shape);
  return (v): v is Checked<S> => isRecord(v) && entries.every(([key, guard]) => guard(v[key]));
}

export function oneOf<T extends unknown[]>(...guards: { [K in keyof T]: Guard<T[K]> }): Guard<T[number]> {
  return (v): v is T[number] => guards.some((g) => g(v));
}

/** JSON text to a value, or undefined when it is not JSON. */
export function parseJson(text: string | Buffer): unknown {
  try {
    return JSON.parse(typeof text === "string" ? text : text.toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}
