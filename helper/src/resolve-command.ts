// resolve-command (docs/contract.md#helper-commands): finds an executable the way the workspace environment would,
// reading only PATH. Not confined to the workspace: commands normally live outside it.
import { constants } from "node:fs";
import { access, realpath } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve } from "node:path";

const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";

// Any failure means "not this candidate". Directories pass X_OK too (a reference quirk).
async function executable(candidate: string): Promise<string | null> {
  try {
    await access(candidate, constants.X_OK);
    return await realpath(candidate);
  } catch {
    return null;
  }
}

function searchDirectories(): string[] {
  // The Node running the helper comes first, so `node` resolves to it even without PATH.
  const path = process.env.PATH ?? DEFAULT_PATH;
  return [...new Set([dirname(process.execPath), ...path.split(":")])];
}

export async function resolveCommand(root: string, name: string | undefined): Promise<object> {
  if (!name) throw new Error("--name is required");
  if (name.includes("/")) {
    return { path: await executable(isAbsolute(name) ? name : resolve(root, name)) };
  }
  for (const directory of searchDirectories()) {
    // An empty PATH element yields a cwd-relative candidate (reference quirk).
    const found = await executable(join(directory, name));
    if (found !== null) return { path: found };
  }
  return { path: null };
}
