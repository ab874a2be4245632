// Entry point of the remote agent: the one program the runtime starts on a host, always through the
// same fixed bootstrap command line. Modes (argv[2]):
//   (none)      one conversation on stdin/stdout (tests run the bundled agent like this)
//   daemon      the long-lived host daemon serving every conversation of this root and build
//   daemon-up   makes sure the daemon runs, prints where it listens, exits
//   relay       makes sure the daemon runs and pipes stdin/stdout to its socket (for sshd that
//               refuses stream-local forwarding)
//   pty-attach  the workload side of a PTY exec on an sshd pseudo-terminal
//   agent-hold  holds the session sshd forwards the Paseo side's ssh-agent to (workspace/ssh-agent.ts)
//   git-credential  git's credential helper in a workspace created with forwardGitCredentials
//               (workspace/git-credential-relay.ts); started by git, not by the runtime
// Every mode the runtime starts writes the ready marker first (so login-shell noise before it can be skipped).
// Secrets (workload env) arrive only in frames, never on a command line or in a file.
import { dirname } from "node:path";
import { AGENT_READY_MARKER } from "../shared/frames.js";
import type { ConversationPort } from "./serve-conversation.js";
import { serveConversation } from "./serve-conversation.js";
import { execSupervisors } from "./exec/sessions.js";
import { ptyAttachMain } from "./exec/pty-attach.js";
import { expandRoot } from "./expand-root.js";
import { holdAgentRoot } from "./root-guard.js";
import { daemonMain } from "./daemon/host-daemon.js";
import { daemonUpMain, relayMain } from "./daemon/up.js";
import { daemonPaths } from "./daemon/daemon-paths.js";
import { agentHoldMain } from "./workspace/ssh-agent.js";
import { credentialHelperMain } from "./workspace/git-credential-relay.js";

function stdioPort(): ConversationPort {
  const out = process.stdout;
  return {
    write: (buf) => (out.destroyed ? true : out.write(buf)),
    drained: () =>
      new Promise((resolve) => {
        if (!out.writableNeedDrain || out.destroyed) return resolve();
        const done = () => {
          out.off("drain", done).off("close", done).off("error", done);
          resolve();
        };
        out.once("drain", done).once("close", done).once("error", done);
      }),
    pauseInput: () => process.stdin.pause(),
    resumeInput: () => process.stdin.resume(),
    // Let stdout drain before exiting so the last frame is never lost.
    finish: (failed) => out.write(Buffer.alloc(0), () => process.exit(failed ? 1 : 0)),
    onData: (l) => process.stdin.on("data", l),
    onClose: (l) => {
      process.stdin.on("end", () => l("end"));
      // A lost channel shows as EPIPE on stdout; treat it like a lost conversation instead of crashing.
      out.on("error", () => l("link-lost"));
    },
  };
}

function oneShotMain(): void {
  process.stdout.write(AGENT_READY_MARKER);
  // A hang-up or termination of the agent itself is a lost control channel, not a reason to orphan.
  for (const sig of ["SIGHUP", "SIGTERM"] as const) {
    process.on(
      sig,
      () =>
        void execSupervisors.abandonAll().then((failures) => {
          for (const f of failures) process.stderr.write(`agent: reaping failed: ${f}\n`);
          process.exit(1);
        }),
    );
  }
  serveConversation(stdioPort(), { agentDir: dirname(__filename), nodePath: process.execPath, resolveRoot: expandRoot });
}

function main(): void {
  const mode = process.argv[2];
  // Before anything names a path under the root: what the bootstrap verified is what is held on to.
  try {
    holdAgentRoot(dirname(__filename));
  } catch (err) {
    process.stderr.write(`agent: ${(err as Error).message}\n`);
    process.exit(1);
  }
  if (mode === "pty-attach") return ptyAttachMain(process.argv[3] ?? "");
  if (mode === "daemon") return daemonMain(__filename, process.argv.slice(3));
  if (mode === "daemon-up") return daemonUpMain(__filename, process.argv.slice(3));
  if (mode === "relay") return relayMain(__filename, process.argv.slice(3));
  // git reads its helper's stdout: no marker.
  if (mode === "git-credential") return void credentialHelperMain(__filename, process.argv.slice(3));
  if (mode === "agent-hold") {
    process.stdout.write(AGENT_READY_MARKER);
    return agentHoldMain(daemonPaths(__filename).root);
  }
  oneShotMain();
}

declare const __filename: string;
main();
