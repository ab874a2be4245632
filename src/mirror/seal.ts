// merge-to-base and the work that comes back (bring-back.ts) write into a repository on the Paseo
// host, so where they write must not be up to the remote host: the integration target (repository
// path, base branch) and the work home (the repository's git directory) are recorded in the remote
// manifest, but sealed at create with an HMAC whose key never leaves this machine, bound to the
// runtime instance, the workspace id and the commit it was created from. A target the host
// altered, or copied from another workspace, does not verify and nothing local is touched.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { linkSync, lstatSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { RuntimeError } from "../shared/errors.js";
import type { IntegrationTarget, SealedIntegration, SealedRepo } from "../shared/agent-api.js";

/** `$XDG_STATE_HOME/paseo-ssh-runtime` (default `~/.local/state/paseo-ssh-runtime`). */
export function stateDir(): string {
  return join(process.env.XDG_STATE_HOME || join(homedir(), ".local", "state"), "paseo-ssh-runtime");
}

const KEY_FILE = "integration.key";

function checkPrivate(path: string, kind: "directory" | "file"): void {
  const dir = kind === "directory";
  const st = lstatSync(path);
  const uid = process.getuid?.();
  if ((dir ? !st.isDirectory() : !st.isFile()) || (uid !== undefined && st.uid !== uid) || (st.mode & 0o077) !== 0) {
    throw new RuntimeError(
      "input",
      `Refusing ${path}: it must be a ${dir ? "directory" : "file"} of this user, closed to others (mode 0${dir ? 700 : 600})`,
    );
  }
}

/** This machine's sealing key, created (32 random bytes, 0600) on first use. */
function sealingKey(): Buffer {
  const dir = stateDir();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  checkPrivate(dir, "directory");
  const path = join(dir, KEY_FILE);
  try {
    checkPrivate(path, "file");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    // Written aside and linked into place: a concurrent first use keeps whichever key won.
    const tmp = join(dir, `.${KEY_FILE}.${randomBytes(6).toString("hex")}.tmp`);
    try {
      writeFileSync(tmp, randomBytes(32).toString("hex") + "\n", { mode: 0o600, flag: "wx" });
      linkSync(tmp, path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    } finally {
      rmSync(tmp, { force: true });
    }
  }
  const key = Buffer.from(readFileSync(path, "utf8").trim(), "hex");
  if (key.length !== 32) throw new RuntimeError("input", `Refusing ${path}: not a 32-byte hex key`);
  return key;
}

export interface SealBinding {
  owner: string;
  workspaceId: string;
  /** The commit the workspace is created from. */
  commit: string;
}

function hmac(kind: string, bind: SealBinding, fields: string[]): string {
  const material = JSON.stringify([`paseo-ssh-runtime/${kind}`, bind.owner, bind.workspaceId, bind.commit, ...fields]);
  return createHmac("sha256", sealingKey()).update(material, "utf8").digest("hex");
}

function mac(target: Pick<IntegrationTarget, "localPath" | "baseBranch">, bind: SealBinding): string {
  return hmac("integration-v1", bind, [target.localPath, target.baseBranch]);
}

function sameMac(given: string, wanted: string): boolean {
  const a = Buffer.from(given, "utf8");
  const b = Buffer.from(wanted, "utf8");
  return a.length === b.length && timingSafeEqual(a, b);
}

export function sealWorkHome(gitDir: string, bind: SealBinding): SealedRepo {
  return { gitDir, seal: hmac("work-home-v1", bind, [gitDir]) };
}

/** The git directory if this machine sealed it for exactly this workspace; null otherwise. */
export function verifyWorkHome(home: { gitDir?: unknown; seal?: unknown } | null, bind: SealBinding): string | null {
  if (!home || typeof home.gitDir !== "string" || typeof home.seal !== "string") return null;
  return sameMac(home.seal, hmac("work-home-v1", bind, [home.gitDir])) ? home.gitDir : null;
}

export function sealIntegration(localPath: string, baseBranch: string, bind: SealBinding): SealedIntegration {
  return { localPath, baseBranch, seal: mac({ localPath, baseBranch }, bind) };
}

/** Returns the target if this machine sealed it for exactly this workspace; refuses otherwise. */
export function verifyIntegration(target: IntegrationTarget | null | undefined, bind: SealBinding): IntegrationTarget {
  const t = (typeof target === "object" && target !== null ? target : {}) as Partial<IntegrationTarget>;
  const wellFormed = typeof t.localPath === "string" && typeof t.baseBranch === "string" && typeof t.seal === "string";
  if (!wellFormed || !sameMac(t.seal!, mac(t as IntegrationTarget, bind))) {
    throw new RuntimeError(
      "remote",
      `merge-to-base refused: the host's record of where workspace ${bind.workspaceId} merges was not sealed by this machine for it (altered on the host, or created elsewhere or by an older version)`,
    );
  }
  return t as IntegrationTarget;
}
