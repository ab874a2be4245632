// The configured remote root as the agent sees it: `~/…` is the login user's home on this host.
import { homedir } from "node:os";
import { resolve } from "node:path";

export function expandRoot(root: string): string {
  if (root === "~") return homedir();
  if (root.startsWith("~/")) return resolve(homedir(), root.slice(2));
  return resolve(root);
}
