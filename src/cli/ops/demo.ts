// `demo [--host [user@]host[:port] [--identity-file …] [--known-hosts-file …] [--root …]]`:
// a guided tour of the runtime. Without --host it starts an embedded SSH server on 127.0.0.1 so
// nothing needs setting up; either way every step spawns this executable as Paseo would. Exits 0
// only if every step passed; leaves no temp directory, process or remote workspace behind.
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Writable } from "node:stream";
import { RuntimeError } from "../../shared/errors.js";
import { expandLocalPath, parseRuntimeOptions } from "../../transport/options.js";
import { privateBrokerEnv, stopPrivateBrokers } from "../../demo/brokers.js";
import { shortTempBase, startEmbeddedServer, type EmbeddedServer } from "../../demo/embedded-server.js";
import { hostOptions, parseHostSpec } from "../host-spec.js";
import { prepareSource, type DemoSource } from "../../demo/source-repo.js";
import { reportStep, runTour, type TourTotals } from "../../demo/tour.js";
import type { CliOperation, OperationArgs } from "../operation.js";

function remoteOptions(flags: OperationArgs["flags"]): Record<string, string | number> {
  const options: Record<string, string | number> = {
    ...hostOptions(parseHostSpec(flags.host!)),
    ...(flags["identity-file"] !== undefined ? { identityFile: expandLocalPath(flags["identity-file"]) } : {}),
    ...(flags["known-hosts-file"] !== undefined ? { knownHostsFile: expandLocalPath(flags["known-hosts-file"]) } : {}),
    ...(flags.root !== undefined ? { root: flags.root } : {}),
  };
  parseRuntimeOptions(options);
  return options;
}

function embeddedOptions(server: EmbeddedServer, root: string): Record<string, string | number> {
  return {
    host: server.host,
    port: server.port,
    user: server.user,
    identityFile: server.identityFile,
    knownHostsFile: server.knownHostsFile,
    root,
  };
}

/**
 * The embedded server's remote root: in the home directory (short, because the runtime's PTY
 * sockets live under it, where a private TMPDIR can be long); removed when the demo ends.
 */
function demoRoot(): string {
  return mkdtempSync(join(homedir(), ".paseo-ssh-demo-"));
}

/** Stops the runtime's brokers and reports it as the tour's last line. */
async function localCleanup(brokerTmp: string, out: Writable, totals: TourTotals): Promise<void> {
  const started = performance.now();
  try {
    const stopped = await stopPrivateBrokers(brokerTmp);
    totals.passed++;
    reportStep(out, "local cleanup", "✓", started, `${stopped} SSH broker${stopped === 1 ? "" : "s"} shut down`);
  } catch (err) {
    totals.failed++;
    reportStep(out, "local cleanup", "✗", started, err instanceof Error ? err.message : String(err));
  }
}

/**
 * Ctrl-C (or SIGTERM/SIGHUP) lets the running step finish, skips the rest, destroys the workspace
 * and cleans up; a second signal exits at once. A closed stdout (`demo | head`) must not abort the
 * cleanup either: output is dropped from then on.
 */
function interruptible(io: { stdout: Writable; stderr: Writable }): { interrupted: () => boolean; release: () => void } {
  let count = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    count++;
    if (count > 1) process.exit(130);
    io.stderr.write(`demo: ${signal} received; cleaning up (again to quit at once)\n`);
  };
  const onOutputError = () => undefined;
  const signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
  for (const s of signals) process.on(s, onSignal);
  io.stdout.on("error", onOutputError);
  return {
    interrupted: () => count > 0,
    release: () => {
      for (const s of signals) process.off(s, onSignal);
    },
  };
}

const operation: CliOperation = {
  requiredFlags: [],
  optionalFlags: ["host", "identity-file", "known-hosts-file", "root"],
  async run(args, io) {
    const { flags } = args;
    if (flags.host === undefined && (flags["identity-file"] ?? flags["known-hosts-file"] ?? flags.root) !== undefined) {
      throw new RuntimeError("input", "--identity-file, --known-hosts-file and --root need --host (the embedded server brings its own)");
    }
    const entry = process.argv[1];
    if (!entry) throw new RuntimeError("input", "cannot tell which executable is running; run demo through paseo-ssh-runtime");
    const remote = flags.host !== undefined ? remoteOptions(flags) : undefined;
    const started = performance.now();
    // Short: the brokers' Unix sockets live under it.
    const work = mkdtempSync(join(shortTempBase(), "pdemo-"));
    const brokerTmp = join(work, "t");
    mkdirSync(brokerTmp);
    let server: EmbeddedServer | undefined;
    let root: string | undefined;
    let source: DemoSource | undefined;
    const interrupt = interruptible(io);
    try {
      const prepared = prepareSource(process.cwd(), work);
      source = prepared.source;
      if (prepared.note) io.stdout.write(`note: ${prepared.note}\n`);
      if (!remote) {
        server = await startEmbeddedServer();
        root = demoRoot();
      }
      const options = remote ?? embeddedOptions(server!, root!);
      const where = server
        ? `embedded SSH server ${server.user}@${server.host}:${server.port}`
        : `${String(options.user ?? "")}${options.user ? "@" : ""}${options.host}:${options.port ?? 22}`;
      io.stdout.write(`paseo-ssh-runtime demo against ${where}\n`);
      const totals = await runTour(
        {
          cmd: { argv: [process.execPath, realpathSync(entry)], id: "demo", env: privateBrokerEnv(brokerTmp) },
          options,
          source,
          ptyAvailable: server?.ptySupported ?? true,
          interrupted: interrupt.interrupted,
        },
        io.stdout,
      );
      await localCleanup(brokerTmp, io.stdout, totals);
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      const skipped = totals.skipped ? `, ${totals.skipped} skipped` : "";
      io.stdout.write(`demo: ${totals.passed} passed, ${totals.failed} failed${skipped} in ${seconds} s\n`);
      if (interrupt.interrupted()) return 130;
      return totals.failed === 0 ? 0 : 1;
    } finally {
      interrupt.release();
      source?.cleanup();
      await server?.close();
      if (root) rmSync(root, { recursive: true, force: true });
      rmSync(work, { recursive: true, force: true });
    }
  },
};
export default operation;
