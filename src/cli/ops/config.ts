// `config --host [user@]host[:port]|alias [--id ssh] [--identity-file …] [--known-hosts-file …]
// [--ssh-config <file>|false] [--root …] [--remote-node …] [--label …] [--doctor true]`: prints the `workspaceRuntimes` entry to paste
// into Paseo's config.json (docs/contract.md#registration), pointing at this installation. The options are checked
// with the same parser every operation uses, so a pasted entry cannot fail on a typo later.
import { accessSync, constants, existsSync, realpathSync } from "node:fs";
import * as z from "zod";
import { RuntimeError } from "../../shared/errors.js";
import { expandLocalPath, parseRuntimeOptions } from "../../transport/options.js";
import type { CliOperation, OperationIO } from "../operation.js";
import { hostOptions, parseHostSpec } from "../host-spec.js";

/** Paseo's built-in runtimes own these ids (docs/contract.md#registration). */
const RESERVED_IDS = new Set(["local", "worktree"]);

/** The entry shape Paseo accepts (docs/contract.md#registration), strict like Paseo's own parser. */
export const RuntimeConfigEntrySchema = z.strictObject({
  type: z.literal("command"),
  label: z.string().min(1).optional(),
  command: z.array(z.string().min(1)).min(1),
  options: z.record(z.string(), z.json()).optional(),
});
export type RuntimeConfigEntry = z.infer<typeof RuntimeConfigEntrySchema>;

/**
 * The command Paseo should spawn: this installation's executable, by absolute path. The entry
 * script is argv[1] (operation modules live in bundle chunks beside it, so not import.meta.url).
 */
export function runtimeCommand(): string[] {
  const entry = process.argv[1];
  if (!entry) throw new RuntimeError("input", "cannot tell which executable is running; run config through paseo-ssh-runtime");
  const cli = realpathSync(entry);
  try {
    accessSync(cli, constants.X_OK);
    return [cli];
  } catch {
    // Without the executable bit the shebang cannot run; Paseo spawns without a shell, so name node.
    return [process.execPath, cli];
  }
}

function localFile(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const path = expandLocalPath(value);
  if (!existsSync(path)) throw new RuntimeError("input", `${flag} ${path} does not exist`);
  return path;
}

export function buildConfigEntry(flags: Record<string, string>): { id: string; entry: RuntimeConfigEntry } {
  const id = flags.id ?? "ssh";
  if (id.trim() === "") throw new RuntimeError("input", "--id must be a non-empty runtime id");
  if (RESERVED_IDS.has(id)) throw new RuntimeError("input", `Workspace runtime id is reserved: ${id}`);
  const label = flags.label ?? `SSH ${flags.host}`;
  if (label.trim() === "") throw new RuntimeError("input", "--label must not be empty");

  const target = parseHostSpec(flags.host ?? "");
  const identityFile = localFile("--identity-file", flags["identity-file"]);
  const sshConfig = flags["ssh-config"] === "false" ? false : localFile("--ssh-config", flags["ssh-config"]);
  const knownHostsFile = localFile("--known-hosts-file", flags["known-hosts-file"]);
  const options: Record<string, string | number | boolean> = {
    ...hostOptions(target),
    ...(identityFile !== undefined ? { identityFile } : {}),
    ...(knownHostsFile !== undefined ? { knownHostsFile } : {}),
    ...(flags.root !== undefined ? { root: flags.root } : {}),
    ...(flags["remote-node"] !== undefined ? { remoteNode: flags["remote-node"] } : {}),
    // An ssh_config alias stays the alias, so later edits to the config apply.
    ...(sshConfig !== undefined ? { sshConfig } : {}),
  };
  parseRuntimeOptions(options);
  const entry = RuntimeConfigEntrySchema.parse({ type: "command", label, command: runtimeCommand(), options });
  return { id, entry };
}

async function runDoctor(options: RuntimeConfigEntry["options"], io: OperationIO): Promise<void> {
  const doctor = (await import("./doctor.js")).default;
  // The doctor's report goes to stderr: stdout carries only the entry to paste.
  const code = await doctor.run({ flags: { options: JSON.stringify(options) }, leading: [] }, { ...io, stdout: io.stderr });
  if (code !== undefined && code !== 0) throw new RuntimeError("remote", "doctor found problems; no configuration printed");
}

function parseBooleanFlag(name: string, value: string | undefined): boolean {
  if (value === undefined || value === "false") return false;
  if (value === "true") return true;
  throw new RuntimeError("input", `--${name} expects true or false, got "${value}"`);
}

const operation: CliOperation = {
  requiredFlags: ["host"],
  optionalFlags: ["id", "identity-file", "known-hosts-file", "ssh-config", "root", "remote-node", "label", "doctor"],
  async run(args, io) {
    const withDoctor = parseBooleanFlag("doctor", args.flags.doctor);
    const { id, entry } = buildConfigEntry(args.flags);
    // Resolving the host through ssh_config now turns a refused keyword or a ProxyJump loop into
    // an error here rather than on Paseo's first operation.
    const { resolvePlan } = await import("../../transport/ssh-config/resolve.js");
    await resolvePlan(parseRuntimeOptions(entry.options));
    if (withDoctor) await runDoctor(entry.options, io);
    io.stdout.write(`${JSON.stringify({ workspaceRuntimes: { [id]: entry } }, null, 2)}\n`);
    return 0;
  },
};
export default operation;
