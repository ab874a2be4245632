// Which SSH server the local rig runs: OpenSSH's sshd when it is installed, otherwise the embedded
// ssh2 server that `npm run demo` uses, so `npm test` works on a machine without openssh-server.
// PASEO_TEST_SERVER=embedded picks the embedded server even where sshd exists (to see what such a
// machine runs); PASEO_TEST_SERVER=openssh (CI) requires sshd and fails instead of falling back,
// so the full suite can never shrink unnoticed.
import { accessSync, constants } from "node:fs";

export const SSHD_PATH = "/usr/sbin/sshd";

export type RigServer = "openssh" | "embedded";

export interface ServerChoice {
  server: RigServer;
  /** Why, for the run's last line: e.g. "PASEO_TEST_SERVER=embedded" or "no /usr/sbin/sshd". */
  because: string;
}

export function sshdInstalled(path = SSHD_PATH): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The decision, from the PASEO_TEST_SERVER value and whether sshd is installed at `sshdPath`. */
export function chooseServer(requested: string | undefined, sshdPath = SSHD_PATH): ServerChoice {
  const installed = sshdInstalled(sshdPath);
  switch (requested ?? "") {
    case "":
      return installed ? { server: "openssh", because: `${sshdPath} is installed` } : { server: "embedded", because: `no ${sshdPath}` };
    case "embedded":
      return { server: "embedded", because: "PASEO_TEST_SERVER=embedded" };
    case "openssh":
      if (!installed) throw new Error(`PASEO_TEST_SERVER=openssh requires ${sshdPath}, which is missing: apt-get install openssh-server`);
      return { server: "openssh", because: "PASEO_TEST_SERVER=openssh" };
    default:
      throw new Error(`PASEO_TEST_SERVER must be "openssh" or "embedded" (or unset), not "${requested}"`);
  }
}
