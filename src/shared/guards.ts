// Schemas for JSON that crossed a process boundary (agent messages, requests, answers, records).
// The agent bundle may use Node built-ins only, so this is not zod: a handful of composable type
// guards. Each wire message is declared once, as a schema; its type is inferred from it
// (`type X = Infer<typeof X>`), so the check and the type cannot drift apart. A guard may carry
// the one-line message that says why a value fails it (`failure()` finds the innermost one).

export type Guard<T> = (value: unknown) => value is T;

/** The type a schema checks. */
export type Infer<G> = G extends Guard<infer T> ? T : never;

/** A field that may be absent: `object()` makes its key optional. */
export type OptionalGuard<T> = Guard<T | undefined> & { readonly optional: true };

/** How a guard is built, for `failure()`; absent for the plain ones. */
type Meta =
  | { kind: "object"; fields: Array<[string, Guard<unknown>]> }
  | { kind: "variant"; key: string; members: Record<string, Guard<unknown>> }
  | { kind: "inner"; inner: Guard<unknown>; message?: string }
  | { kind: "all"; guards: Array<Guard<unknown>> };
const metas = new WeakMap<Guard<unknown>, Meta>();

function withMeta<G extends Guard<unknown>>(guard: G, meta: Meta): G {
  metas.set(guard, meta);
  return guard;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export const isUnknown: Guard<unknown> = (_v): _v is unknown => true;
export const isString: Guard<string> = (v): v is string => typeof v === "string";
export const isNonEmptyString: Guard<string> = (v): v is string => typeof v === "string" && v !== "";
export const isBoolean: Guard<boolean> = (v): v is boolean => typeof v === "boolean";
export const isNumber: Guard<number> = (v): v is number => typeof v === "number" && Number.isFinite(v);
export const isInteger: Guard<number> = (v): v is number => Number.isSafeInteger(v);

/** Sizes, counts and ids that must be whole and at least 1 (PTY rows/cols, resize ids). */
export const isPositiveInt: Guard<number> = (v): v is number => Number.isSafeInteger(v) && (v as number) >= 1;

/** A whole number within [min, max]. */
export function intIn(min: number, max: number): Guard<number> {
  return (v): v is number => Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max;
}

/** A string `re` matches. */
export function matching(re: RegExp): Guard<string> {
  return (v): v is string => typeof v === "string" && re.test(v);
}

/** A terminal dimension as a kernel takes it (TIOCSWINSZ holds an unsigned short): larger ones are clamped. */
export const MAX_WINDOW_DIMENSION = 65535;
export function windowDimension(n: number): number {
  return Math.min(n, MAX_WINDOW_DIMENSION);
}

export function literal<const T extends string | number | boolean | null>(...values: T[]): Guard<T> {
  return (v): v is T => values.includes(v as T);
}

export const isNull = literal(null);

export function nullable<T>(guard: Guard<T>): Guard<T | null> {
  return withMeta((v): v is T | null => v === null || guard(v), { kind: "inner", inner: guard });
}

/** A field that may be absent (or undefined). */
export function optional<T>(guard: Guard<T>): OptionalGuard<T> {
  const g = Object.assign((v: unknown): v is T | undefined => v === undefined || guard(v), { optional: true as const });
  return withMeta(g, { kind: "inner", inner: guard });
}

export function arrayOf<T>(guard: Guard<T>): Guard<T[]> {
  return (v): v is T[] => Array.isArray(v) && v.every(guard);
}

export function recordOf<T>(guard: Guard<T>): Guard<Record<string, T>> {
  return (v): v is Record<string, T> => isRecord(v) && Object.values(v).every(guard);
}

/** `guard`, whose failure reads `message` (unless a field inside it says more). */
export function withMessage<G extends Guard<unknown>>(guard: G, message: string): G {
  const g = ((v: unknown) => guard(v)) as G;
  if ((guard as Partial<OptionalGuard<unknown>>).optional) Object.assign(g, { optional: true });
  return withMeta(g, { kind: "inner", inner: guard, message });
}

/** `guard`, and then `holds` on what it passed (a rule across fields); wrap it in withMessage() to say why. */
export function refine<T>(guard: Guard<T>, holds: (value: T) => boolean): Guard<T> {
  return withMeta((v): v is T => guard(v) && holds(v), { kind: "inner", inner: guard });
}

/** Both guards, checked in this order (the first failing one says why). */
export function allOf<A, B>(a: Guard<A>, b: Guard<B>): Guard<Flat<A & B>> {
  return withMeta((v): v is Flat<A & B> => a(v) && b(v), { kind: "all", guards: [a, b] });
}

type Shape = Record<string, Guard<unknown>>;
type OptionalKeys<S extends Shape> = { [K in keyof S]: S[K] extends { readonly optional: true } ? K : never }[keyof S];
type Flat<T> = { [K in keyof T]: T[K] } & {};
export type Checked<S extends Shape> = Flat<
  { [K in Exclude<keyof S, OptionalKeys<S>>]: Infer<S[K]> } & { [K in OptionalKeys<S>]?: Exclude<Infer<S[K]>, undefined> }
>;

/** An object whose listed fields pass their guards (checked in order); unlisted fields are tolerated. */
export function object<S extends Shape>(shape: S): Guard<Checked<S>> {
  const entries = Object.entries(shape);
  return withMeta((v): v is Checked<S> => isRecord(v) && entries.every(([key, guard]) => guard(v[key])), {
    kind: "object",
    fields: entries,
  });
}

export function oneOf<T extends unknown[]>(...guards: { [K in keyof T]: Guard<T[K]> }): Guard<T[number]> {
  return (v): v is T[number] => guards.some((g) => g(v));
}

/** A union told apart by its `key` field: `members[tag]` checks the object whose `key` is `tag`. */
export function variant<K extends string, M extends Record<string, Guard<Record<string, unknown>>>>(
  key: K,
  members: M,
): Guard<Infer<M[keyof M]>> {
  return withMeta(
    (v): v is Infer<M[keyof M]> => {
      if (!isRecord(v) || typeof v[key] !== "string" || !Object.hasOwn(members, v[key])) return false;
      return members[v[key]]!(v);
    },
    { kind: "variant", key, members },
  );
}

/**
 * Why `value` fails `guard`: the message of the innermost failing guard that has one (fields in
 * their declared order), undefined when none has; null when it passes.
 */
export function failure(guard: Guard<unknown>, value: unknown): string | undefined | null {
  if (guard(value)) return null;
  const meta = metas.get(guard);
  if (meta?.kind === "inner") return failure(meta.inner, value) ?? meta.message;
  if (meta?.kind === "all") {
    for (const g of meta.guards) {
      const why = failure(g, value);
      if (why !== null) return why;
    }
  }
  if (meta?.kind === "object" && isRecord(value)) {
    for (const [key, field] of meta.fields) {
      const why = failure(field, value[key]);
      if (why !== null) return why;
    }
  }
  if (meta?.kind === "variant" && isRecord(value)) {
    const tag = value[meta.key];
    if (typeof tag === "string" && Object.hasOwn(meta.members, tag)) return failure(meta.members[tag]!, value);
  }
  return undefined;
}

/** `value` once `guard` passes it; otherwise throws what `fail` makes of the reason (see failure()). */
export function parse<T>(guard: Guard<T>, value: unknown, fail: (why: string | undefined) => Error): T {
  const why = failure(guard, value);
  if (why !== null) throw fail(why);
  return value as T;
}

/** JSON text to a value, or undefined when it is not JSON. */
export function parseJson(text: string | Buffer): unknown {
  try {
    return JSON.parse(typeof text === "string" ? text : text.toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}
