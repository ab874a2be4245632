// Reaching the broker for a host configuration from a runtime process: connect to its socket and
// check its hello; if there is no live broker of our version (none yet, crashed, old build, hung,
// or a socket that is not safely ours) start one detached and connect once it listens. Brokers
// settle among themselves who serves the socket (process/broker-server.ts), so racing starters are harmless.
import { closeSync, existsSync, openSync, readFileSync, rmSync, statSync, truncateSync } from "node:fs";
import type { Socket } from "node:net";
import { RuntimeError, oneLine } from "../../shared/errors.js";
import type { RuntimeOptions } from "../../transport/options.js";
import type { ConnectionPlan } from "../../transport/ssh-config/resolve.js";
import { dial } from "../common/dial.js";
import { brokerEnvironment, proxyEnvironment } from "./environment.js";
import { withLock } from "../common/lock.js";
import {
  brokerDir,
  brokerKey,
  brokerPaths,
  brokerScriptPath,
  brokerVersion,
  builtBrokerVersion,
  socketTrustworthy,
  type BrokerPaths,
} from "../common/broker-paths.js";
import type { BrokerLaunch } from "../common/broker-launch.js";
import { sleep } from "../../shared/async.js";

/** How long a started broker may take to listen (node start-up plus module loading). */
export const BROKER_START_MS = 10_000;
/**
 * V8 flags of the broker process: no optimising compiler (interpreter and baseline code only).
 * Measured with 100 live execs attached: ~4.5 MB less RSS (the compiler's code pages of the node
 * binary are never touched), and no more broker CPU per exec or per MB a create sends (its hot
 * paths are ssh2's native crypto and socket writes; what it saves is compiling).
 */
export const BROKER_NODE_FLAGS = maxOptKnown(process.version) ? ["--max-opt=1"] : [];

/**
 * Whether this node's V8 takes `--max-opt` (V8 10.x onwards: Node 20-24 here). An unknown V8 flag
 * makes node refuse to start ("bad option"), so a node we do not know runs the broker without it.
 */
export function maxOptKnown(version: string): boolean {
  const major = Number(/^v(\d+)\./.exec(version)?.[1] ?? 0);
  return major >= 20 && major <= 24;
}
/** The log is for diagnosis, not history: restart it beyond this size. */
const MAX_LOG_BYTES = 1024 * 1024;

export interface BrokerTarget {
  paths: BrokerPaths;
  /** The resolved hop chain the broker is keyed by and connects through. */
  plan?: ConnectionPlan;
  version: string;
  script: string;
}

/** Unix socket paths longer than this cannot be bound (104 bytes on macOS, 108 on Linux). */
const MAX_SOCKET_PATH = 100;

/**
 * Null when no private directory is usable or its socket path would be too long to bind (the
 * caller then connects in-process). `version`: the broker version built into this code, or that
 * of the broker script on disk now (they differ once dist/ was rebuilt under us).
 */
export function brokerTarget(options: RuntimeOptions, plan?: ConnectionPlan, version: "built" | "on-disk" = "built"): BrokerTarget | null {
  const dir = brokerDir();
  if (!dir) return null;
  const script = brokerScriptPath();
  const current = (version === "built" && builtBrokerVersion()) || brokerVersion(script);
  const paths = brokerPaths(dir, brokerKey(options, current, plan));
  if (Buffer.byteLength(paths.socket) > MAX_SOCKET_PATH) return null;
  return { paths, version: current, script, ...(plan ? { plan } : {}) };
}

/** The broker's last log line (its reason for failing to start), kept to one short line. */
function lastLogLine(log: string): string {
  try {
    const lines = readFileSync(log, "utf8").trim().split("\n");
    return oneLine(lines[lines.length - 1] ?? "")
      .replace(/^\S+Z /, "")
      .slice(0, 300);
  } catch {
    return "no log";
  }
}

/** Starts a broker; `onFailed` runs if it exits unsuccessfully (a loser of the race exits 0). */
async function startBroker(options: RuntimeOptions, target: BrokerTarget, onFailed: () => void): Promise<void> {
  // Loaded only here: a process that finds its broker running never spawns anything, and
  // node:child_process is a measurable part of a runtime process's start-up.
  const { spawn } = await import("node:child_process");
  const { paths } = target;
  try {
    if (statSync(paths.log).size > MAX_LOG_BYTES) truncateSync(paths.log, 0);
  } catch {
    // No log yet.
  }
  const logFd = openSync(paths.log, "a", 0o600);
  try {
    // Only stdio 0-2 are passed: the broker must never hold Paseo's fd3/fd4 (or anything else) open,
    // nor (for its whole life) Paseo's environment.
    const child = spawn(process.execPath, [...BROKER_NODE_FLAGS, target.script], {
      detached: true,
      stdio: ["pipe", "ignore", logFd],
      env: brokerEnvironment(),
    });
    const proxyEnv = proxyEnvironment(target.plan);
    const launch: BrokerLaunch = { options, paths, ...(target.plan ? { plan: target.plan } : {}), ...(proxyEnv ? { proxyEnv } : {}) };
    child.stdin!.on("error", () => undefined);
    child.stdin!.end(JSON.stringify(launch));
    child.on("error", onFailed);
    child.on("exit", (code) => code !== 0 && onFailed());
    child.unref();
  } finally {
    closeSync(logFd);
  }
}

/** A socket that is not a socket, not ours or readable by others is removed, never used. */
async function dropUntrustedSocket(paths: BrokerPaths): Promise<void> {
  if (!existsSync(paths.socket)) return;
  let trusted = false;
  try {
    trusted = socketTrustworthy(paths.socket);
  } catch {
    return;
  }
  if (trusted) return;
  await withLock(paths.lock, async () => {
    if (existsSync(paths.socket) && !socketTrustworthy(paths.socket)) rmSync(paths.socket, { force: true });
  });
}

/**
 * A connected socket whose hello matched our version; `early` as for dial(). `start: false`: only
 * a broker that runs now will do (the broker's own hand-off runs, which must not bring back a
 * broker, and with it a host daemon, that was stopped while they ran).
 */
export async function connectBroker(options: RuntimeOptions, initial: BrokerTarget, early?: string, start = true): Promise<Socket> {
  const until = Date.now() + BROKER_START_MS;
  let target = initial;
  let started = false;
  let failed = false;
  let last = "";
  for (;;) {
    await dropUntrustedSocket(target.paths);
    const r = await dial(target.paths.socket, target.version, undefined, early);
    if (r.state === "ok") return r.sock;
    last = r.state === "absent" ? r.code : r.detail;
    if (r.state === "mismatch") {
      // dist/ was rebuilt since we computed our version (the broker we started loaded the new
      // build): follow the new build's socket instead of waiting on the old one.
      const now = brokerTarget(options, target.plan, "on-disk");
      if (now && now.version !== target.version) {
        target = now;
        started = false;
        failed = false;
        continue;
      }
    }
    if (!start) {
      throw new RuntimeError("network", `the SSH broker for ${options.host} that started this operation is gone (${last})`);
    }
    if (failed) {
      throw new RuntimeError(
        "network",
        `SSH broker for ${options.host} failed to start: ${lastLogLine(target.paths.log)} (set the "broker" option to false to connect in-process)`,
      );
    }
    if (!started) {
      await startBroker(options, target, () => (failed = true));
      started = true;
    }
    if (Date.now() > until) {
      throw new RuntimeError(
        "network",
        `SSH broker for ${options.host} did not start within ${BROKER_START_MS} ms (${last}); see ${target.paths.log} or set the "broker" option to false`,
      );
    }
    await sleep(15);
  }
}
