// Cases only OpenSSH's sshd can show: its log lines, its MaxSessions limit, login shells and their
// rc-file noise, a second login user. Against the embedded server (a machine without sshd) they
// are skipped through this one helper, so every such skip says why with the same prefix and the
// summary reporter can count them.
import type { TestContext } from "vitest";
import { rig } from "./rig.js";

export const NEEDS_OPENSSH = "needs OpenSSH: ";

/** A skip note for an OpenSSH-only case. */
export function openSshOnly(reason: string): string {
  return `${NEEDS_OPENSSH}${reason}`;
}

/** Skips the running test, saying why, when the rig runs the embedded server instead of sshd. */
export function needsOpenSsh(ctx: TestContext, reason: string): void {
  if (rig().server === "embedded") ctx.skip(openSshOnly(reason));
}
