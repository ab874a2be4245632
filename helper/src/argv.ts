// Strict argv grammar of helper protocol v1 (docs/contract.md#helper-argv): Paseo's client and its tests compare the
// exact error texts, so parsing is hand-rolled rather than delegated to a permissive parser.

export type Flags = ReadonlyMap<string, string>;

export interface Invocation {
  command: string;
  flags: Flags;
}

/** Allowed flags per sub-command; an unknown sub-command has an empty allow-list. */
export const ALLOWED_FLAGS: Readonly<Record<string, readonly string[]>> = {
  describe: [],
  watch: [],
  "fs-stat": ["--path"],
  "fs-list": ["--path"],
  "fs-read": ["--path"],
  "fs-write": ["--path", "--expected-modified-at", "--expected-revision"],
  "resolve-command": ["--name"],
  "fs-create-entry": ["--parent-path", "--name", "--kind"],
  "fs-rename-entry": ["--path", "--name"],
  "fs-duplicate-entry": ["--path"],
  "fs-delete-entry": ["--path"],
};

/**
 * Parses `<sub-command> [--name value]...` (argv without node and script). Flags are checked
 * before the sub-command itself, so `bogus --x 1` reports the argument, as the reference does.
 */
export function parseInvocation(args: readonly string[]): Invocation {
  const command = args[0];
  if (command === undefined) throw new Error("Usage: workspace-helper <command>");
  const known = Object.prototype.hasOwnProperty.call(ALLOWED_FLAGS, command);
  const allowed = known ? (ALLOWED_FLAGS[command] ?? []) : [];
  const flags = new Map<string, string>();
  for (let i = 1; i < args.length; i += 2) {
    const name = args[i] as string;
    const value = args[i + 1];
    if (!allowed.includes(name)) throw new Error(`Unknown workspace-helper argument: ${name}`);
    if (value === undefined) throw new Error(`${name} requires a value`);
    if (flags.has(name)) throw new Error(`Duplicate workspace-helper argument: ${name}`);
    flags.set(name, value);
  }
  if (!known) throw new Error(`Unknown workspace-helper command: ${command}`);
  return { command, flags };
}
