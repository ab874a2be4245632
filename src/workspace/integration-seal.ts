// merge-to-base writes into a repository on the Paseo host, so where it writes must not be up to
// the remote host: the integration target (repository path, base branch) is recorded in the remote
// manifest, but sealed at create with an HMAC whose key never leaves this machine, bound to the
// runtime instance, the workspace id and the commit it was created from. A target the host
// altered, or copied from another workspace, does not verify and nothing local is touched.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { linkSync, lstatSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { RuntimeError } from "../shared/errors.js";
import type { IntegrationTarget, SealedIntegration } from "../shared/agent-api.js";

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

function mac(target: Pick<IntegrationTarget, "localPath" | "baseBranch">, bind: SealBinding): string {
  const material = JSON.stringify([
    "paseo-ssh-runtime/integration-v1",
    bind.owner,
    bind.workspaceId,
    bind.commit,
    target.localPath,
    target.baseBranch,
  ]);
  return createHmac("sha256", sealingKey()).update(material, "utf8").digest("hex");
}

export function sealIntegration(localPath: string, baseBranch: string, bind: SealBinding): SealedIntegration {
  return { localPath, baseBranch, seal: mac({ localPath, baseBranch }, bind) };
}

/** Returns the target if this machine sealed it for exactly this workspace; refuses otherwise. */
export function verifyIntegration(target: IntegrationTarget | null | undefined, bind: SealBinding): IntegrationTarget {
  const t = (typeof target === "object" && target !== null ? target : {}) as Partial<IntegrationTarget>;
  const wellFormed = typeof t.localPath === "string" && typeof t.baseBranch === "string" && typeof t.seal === "string";
  const given = Buffer.from(wellFormed ? t.seal! : "", "utf8");
  const wanted = wellFormed ? Buffer.from(mac(t as IntegrationTarget, bind), "utf8") : Buffer.alloc(0);
  if (!wellFormed || given.length !== wanted.length || !timingSafeEqual(given, wanted)) {
    throw new RuntimeError(
      "remote",
      `merge-to-base refused: the host's record of where workspace ${bind.workspaceId} merges was not sealed by this machine for it (altered on the host, or created elsewhere or by an older version)`,
    );
  }
  return t as IntegrationTarget;
}
