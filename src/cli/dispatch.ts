// The runtime executable Paseo spawns once per operation (docs/contract.md#invocation):
//   <leading args from the daemon config…> <operation> [--flag value]…
// Finds the operation word, parses its flags strictly, runs the operation module and turns every
// failure into one stderr line plus a stable exit code. Never prints a stack trace.
import type { CommanderError } from "commander";
import { EXIT_CODES, RuntimeError, oneLine } from "../shared/errors.js";
import { helpRequest } from "./help.js";
import type { CliOperation, OperationArgs, OperationIO } from "./operation.js";
import { OPERATIONS, isOperationName, loadOperation, type OperationName } from "./ops/registry.js";

interface ParsedArgv {
  operation: OperationName;
  leading: string[];
  rest: string[];
}

function splitArgv(argv: string[]): ParsedArgv {
  const index = argv.findIndex(isOperationName);
  if (index < 0) {
    if (argv.length === 0) {
      throw new RuntimeError("input", `Missing operation; expected one of: ${Object.keys(OPERATIONS).join(", ")}`);
    }
    throw new RuntimeError("input", `Unknown operation: ${guessOperationWord(argv)}`);
  }
  return { operation: argv[index] as OperationName, leading: argv.slice(0, index), rest: argv.slice(index + 1) };
}

/** Paseo appends `<op> [--flag value]…`, so the word before the trailing flag pairs is the op. */
function guessOperationWord(argv: string[]): string {
  let end = argv.length;
  while (end >= 2 && (argv[end - 2] as string).startsWith("--")) end -= 2;
  const word = argv[end - 1];
  if (word !== undefined && !word.startsWith("-")) return word;
  return argv.find((w) => !w.startsWith("-")) ?? (argv[0] as string);
}

/**
 * Shape checks commander does not make (it accepts `--flag=value`, repeats and dash-led values):
 * the operation's arguments must be exactly `--flag value` pairs, each flag at most once.
 */
function checkFlagPairs(operation: string, rest: string[]): void {
  const seen = new Set<string>();
  for (let i = 0; i < rest.length; i += 2) {
    const token = rest[i] as string;
    if (!token.startsWith("--") || token === "--") {
      throw new RuntimeError("input", `Unexpected argument for ${operation}: ${token}`);
    }
    const eq = token.indexOf("=");
    if (eq >= 0) {
      const flag = token.slice(0, eq);
      throw new RuntimeError("input", `Flag ${flag} must be given as two arguments: ${flag} <value>`);
    }
    if (seen.has(token)) throw new RuntimeError("input", `Repeated flag ${token}`);
    seen.add(token);
    const value = rest[i + 1];
    if (value === undefined || value.startsWith("--")) {
      throw new RuntimeError("input", `Missing value for flag ${token}`);
    }
  }
}

/**
 * The flags when every one is declared and every required one is given: the only argv shape that
 * parses without an error, and the one Paseo sends. Null otherwise (commander then finds the error).
 */
function declaredFlags(op: CliOperation, rest: string[]): Record<string, string> | null {
  const given = new Map<string, string>();
  for (let i = 0; i < rest.length; i += 2) given.set((rest[i] as string).slice(2), rest[i + 1] as string);
  const declared = [...op.requiredFlags, ...(op.optionalFlags ?? [])];
  if (op.requiredFlags.some((f) => !given.has(f)) || [...given.keys()].some((f) => !declared.includes(f))) return null;
  // In declaration order, as commander reports them.
  const flags: Record<string, string> = {};
  for (const flag of declared) if (given.has(flag)) flags[flag] = given.get(flag)!;
  return flags;
}

/**
 * Parses the flags strictly against the operation's declared flag set. A well-formed request is
 * parsed here; commander (tens of milliseconds of loading) is brought in only to word a refusal.
 */
async function parseFlags(operation: string, op: CliOperation, rest: string[]): Promise<Record<string, string>> {
  checkFlagPairs(operation, rest);
  return declaredFlags(op, rest) ?? commanderFlags(operation, op, rest);
}

/** commander's parse of the same argv: its errors become our one-line refusals. */
async function commanderFlags(operation: string, op: CliOperation, rest: string[]): Promise<Record<string, string>> {
  const { Command, CommanderError, Option } = await import("commander");
  const command = new Command(operation)
    .helpOption(false)
    .allowExcessArguments(false)
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {}, outputError: () => {} });
  const required = new Set(op.requiredFlags);
  for (const flag of [...op.requiredFlags, ...(op.optionalFlags ?? [])]) {
    const option = new Option(`--${flag} <value>`);
    command.addOption(required.has(flag) ? option.makeOptionMandatory() : option);
  }
  try {
    command.parse(rest, { from: "user" });
  } catch (err) {
    throw err instanceof CommanderError ? flagError(operation, err) : err;
  }
  // commander camel-cases attribute names; report flags by their argv spelling instead.
  const flags: Record<string, string> = {};
  for (const option of command.options) {
    const value = command.getOptionValue(option.attributeName()) as string | undefined;
    if (value !== undefined) flags[option.long!.slice(2)] = value;
  }
  return flags;
}

function flagError(operation: string, err: CommanderError): RuntimeError {
  const quoted = /'(--?[^' ]+)/.exec(err.message)?.[1];
  switch (err.code) {
    case "commander.unknownOption":
      return new RuntimeError("input", `Unknown flag ${quoted ?? "?"} for operation ${operation}`);
    case "commander.missingMandatoryOptionValue":
      return new RuntimeError("input", `${quoted ?? "a flag"} is required`);
    case "commander.optionMissingArgument":
      return new RuntimeError("input", `Missing value for flag ${quoted ?? "?"}`);
    default:
      return new RuntimeError("input", oneLine(err.message.replace(/^error: /, "")));
  }
}

async function dispatch(argv: string[], io: OperationIO): Promise<number> {
  const help = helpRequest(argv, isOperationName);
  if (help !== null) {
    io.stdout.write(help);
    return 0;
  }
  const { operation, leading, rest } = splitArgv(argv);
  const op = await loadOperation(operation);
  const args: OperationArgs = { flags: await parseFlags(operation, op, rest), leading };
  return (await op.run(args, io)) ?? 0;
}

function failureLine(err: unknown): { line: string; code: number } {
  if (err instanceof RuntimeError) return { line: oneLine(err.message), code: err.exitCode };
  const message = err instanceof Error ? err.message : String(err);
  return { line: `internal error: ${oneLine(message)}`, code: EXIT_CODES.remote };
}

function flush(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => stream.write("", () => resolve()));
}

/**
 * process.stdout and process.stderr are made on first use, and only what was made is flushed: on a
 * pipe (as Paseo passes them) making one loads node's net and stream modules, a large part of what
 * `describe` would otherwise cost over bare node.
 */
const made = new Set<NodeJS.WriteStream>();
function output(name: "stdout" | "stderr"): NodeJS.WriteStream {
  const stream = process[name];
  made.add(stream);
  return stream;
}

let finishing = false;
/** Exits explicitly: a lingering socket or timer must never keep a finished operation alive. */
async function finish(code: number, err?: unknown): Promise<void> {
  if (finishing) return;
  finishing = true;
  if (err !== undefined) {
    const failure = failureLine(err);
    code = failure.code;
    output("stderr").write(`${failure.line}\n`);
  }
  await Promise.all([...made].map(flush));
  process.exit(code);
}

process.on("uncaughtException", (err) => void finish(1, err));
process.on("unhandledRejection", (err) => void finish(1, err));

// stdin is resolved lazily: `describe` must not touch it (Paseo closes it without data).
const io: OperationIO = {
  get stdin() {
    return process.stdin;
  },
  get stdout() {
    return output("stdout");
  },
  get stderr() {
    return output("stderr");
  },
  stdoutFd: 1,
};

dispatch(process.argv.slice(2), io).then(
  (code) => finish(code),
  (err: unknown) => finish(1, err),
);
