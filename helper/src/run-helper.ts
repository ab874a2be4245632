// paseo-workspace-helper, protocol v1 of Paseo's helper contract (helper/README.md says what we
// implement of it and where it is specified). Bundled into one self-contained CJS file run by node >= 18 with built-ins
// only; Paseo launches it once per operation with the workspace root as cwd and possibly no PATH.
import { realpathSync } from "node:fs";
import { parseInvocation, type Invocation } from "./argv.js";
import { createEntry, deleteEntry, duplicateEntry, renameEntry } from "./entries.js";
import { statResult } from "./file-info.js";
import { listDirectory } from "./list.js";
import { exitAfterFlush, failHard, writeResult } from "./output.js";
import { readToStdout } from "./read.js";
import { resolveCommand } from "./resolve-command.js";
import { runWatch } from "./watch/session.js";
import { writeFromStdin } from "./write.js";

const DESCRIPTION = { version: 1, capabilities: ["files", "watch", "resolve-command"] };

// The root authority is the process cwd; there is deliberately no --root flag.
function workspaceRoot(): string {
  try {
    return realpathSync(process.cwd());
  } catch (err) {
    throw new Error(`Workspace directory is not accessible: ${(err as Error).message}`);
  }
}

async function dispatch({ command, flags }: Invocation, root: string): Promise<void> {
  const path = flags.get("--path");
  switch (command) {
    case "describe":
      return writeResult(DESCRIPTION);
    case "fs-stat":
      return writeResult(await statResult(root, path));
    case "fs-list":
      return writeResult(await listDirectory(root, path));
    case "fs-read":
      return readToStdout(root, path);
    case "fs-write":
      return writeResult(
        await writeFromStdin(root, {
          rawPath: path,
          expectedRevision: flags.get("--expected-revision"),
          expectedModifiedAt: flags.get("--expected-modified-at"),
        }),
      );
    case "resolve-command":
      return writeResult(await resolveCommand(root, flags.get("--name")));
    case "fs-create-entry":
      return writeResult(await createEntry(root, flags.get("--parent-path"), flags.get("--name"), flags.get("--kind")));
    case "fs-rename-entry":
      return writeResult(await renameEntry(root, path, flags.get("--name")));
    case "fs-duplicate-entry":
      return writeResult(await duplicateEntry(root, path));
    case "fs-delete-entry":
      return writeResult(await deleteEntry(root, path));
    case "watch":
      return runWatch(root);
    default:
      throw new Error(`Unknown workspace-helper command: ${command}`);
  }
}

async function main(): Promise<void> {
  // A vanished reader (EPIPE) ends the helper with one stderr line instead of an uncaught error.
  process.stdout.on("error", failHard);
  const invocation = parseInvocation(process.argv.slice(2));
  await dispatch(invocation, workspaceRoot());
  exitAfterFlush(0);
}

main().catch(failHard);
