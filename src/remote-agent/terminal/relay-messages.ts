// The terminal relay's protocol, declared once: JSON lines the node driver (driver.ts) writes on
// the relay's control descriptor (3) and reads on its status descriptor (4). The relays are not
// TypeScript (relay.py runs under python3, script-child.cjs under util-linux `script` with no
// bundle), so they spell these names themselves: test/terminal/relay-messages.test.ts reads both
// sources and holds their names to the ones here. The sshd-pty attach process (exec/attach-lines.ts)
// answers with the same status messages.
import {
  arrayOf,
  isBoolean,
  isInteger,
  isString,
  literal,
  nullable,
  object,
  optional,
  recordOf,
  variant,
  type Infer,
} from "../../shared/guards.js";

/** What runs, as every launch message names it (the sshd-pty attach process's too). */
export const WORKLOAD_FIELDS = {
  file: isString,
  args: arrayOf(isString),
  argv0: isString,
  cwd: isString,
  env: recordOf(isString),
};

/**
 * driver → relay, first and once: what to run. `tag`: the tag file is the relay's fd 5 (passed
 * on); `tagPath`: a relay started ahead of its exec opens it. `stty`: the `script` relay's stty.
 */
export const RelayLaunch = object({
  type: literal("launch"),
  ...WORKLOAD_FIELDS,
  rows: isInteger,
  cols: isInteger,
  tag: optional(isBoolean),
  tagPath: optional(isString),
  stty: optional(isString),
});
/** driver → relay: size the terminal; answered by `resized` with the same id. */
export const RelayResize = object({ type: literal("resize"), id: isInteger, rows: isInteger, cols: isInteger });
/** driver → relay: a signal (by name) for the workload's foreground group; not answered. */
export const RelaySignal = object({ type: literal("signal"), signal: isString });

const controlMembers = { launch: RelayLaunch, resize: RelayResize, signal: RelaySignal };
export const RelayControl = variant("type", controlMembers);
export type RelayControl = Infer<typeof RelayControl>;

/** relay → driver: the workload runs; its identity (startTime: /proc stat field 22, or ""). */
export const RelaySpawned = object({ type: literal("spawned"), pid: isInteger, pgid: isInteger, sid: isInteger, startTime: isString });
/** relay → driver: the program could not be executed (126/127 and the text to show). */
export const RelaySpawnFailed = object({ type: literal("spawn-failed"), code: isInteger, message: isString });
/** relay → driver: the answer to `resize`: true once the terminal has exactly that size. */
export const RelayResized = object({ type: literal("resized"), id: isInteger, ok: isBoolean });
/** relay → driver, last: the workload's wait status. */
export const RelayExit = object({ type: literal("exit"), code: nullable(isInteger), signal: nullable(isString) });
/** relay → driver: the relay itself failed (the terminal could not be set up). */
export const RelayError = object({ type: literal("error"), message: isString });
/** script relay → probe, in probe mode only: whether descriptors pass and stty sizes the terminal. */
export const RelayProbe = object({ type: literal("probe"), ok: isBoolean });

const statusMembers = {
  spawned: RelaySpawned,
  "spawn-failed": RelaySpawnFailed,
  resized: RelayResized,
  exit: RelayExit,
  error: RelayError,
  probe: RelayProbe,
};
export const RelayStatus = variant("type", statusMembers);
export type RelayStatus = Infer<typeof RelayStatus>;

/** Every message name, each way: what the relays' sources are held to. */
export const RELAY_MESSAGE_TYPES = {
  control: Object.keys(controlMembers) as RelayControl["type"][],
  status: Object.keys(statusMembers) as RelayStatus["type"][],
};
