// Maps each operation word to a lazy loader of its module, so a process only evaluates the code of
// the one operation it runs (`signal` has a 750 ms budget that includes process start).
import type { CliOperation } from "../operation.js";

type Loader = () => Promise<{ default: CliOperation }>;

/** Contract operations (docs/contract.md#operations) in contract order, then the extras, then our own tools. */
export const OPERATIONS = {
  describe: () => import("./describe.js"),
  create: () => import("./create.js"),
  inspect: () => import("./inspect.js"),
  exec: () => import("./exec.js"),
  signal: () => import("./signal.js"),
  pause: () => import("./pause.js"),
  resume: () => import("./resume.js"),
  "release-backing": () => import("./release-backing.js"),
  "merge-to-base": () => import("./merge-to-base.js"),
  destroy: () => import("./destroy.js"),
  reconcile: () => import("./reconcile.js"),
  doctor: () => import("./doctor.js"),
  status: () => import("./status.js"),
  config: () => import("./config.js"),
  demo: () => import("./demo.js"),
  processes: () => import("./processes.js"),
  ports: () => import("./ports.js"),
  adopt: () => import("./adopt.js"),
  work: () => import("./work.js"),
  "work-notice": () => import("./work-notice.js"),
  "git-credential": () => import("./git-credential.js"),
} satisfies Record<string, Loader>;

export type OperationName = keyof typeof OPERATIONS;

export function isOperationName(word: string): word is OperationName {
  return Object.hasOwn(OPERATIONS, word);
}

export async function loadOperation(name: OperationName): Promise<CliOperation> {
  return (await OPERATIONS[name]()).default;
}
