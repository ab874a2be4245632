// The real executable, spawned as Paseo spawns it: describe's exact bytes, leading args, strict
// flag parsing with one-line errors, and request validation that happens before any network use.
import { spawn } from "node:child_process";
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI_PATH, TEST_RUNTIME_INSTANCE_ID, lifecycleRequest, runCli, type CliResult } from "../support/run-cli.js";

const DESCRIBE = '{"protocolVersion":1,"modes":["pipes","pty"],"reconcile":true}\n';

function expectOneLineFailure(result: CliResult, text: string | RegExp, code = 2): void {
  expect(result.code).toBe(code);
  expect(result.stdout.length).toBe(0);
  expect(result.stderr.endsWith("\n")).toBe(true);
  expect(result.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(result.stderr).not.toMatch(/\n\s+at /);
  expect(result.stderr).toMatch(text);
}

describe("describe", () => {
  it("prints exactly the 63 describe bytes and nothing on stderr", async () => {
    const result = await runCli(["describe"]);
    expect(result.code).toBe(0);
    expect(result.stdout.toString("utf8")).toBe(DESCRIBE);
    expect(result.stdout.length).toBe(63);
    expect(result.stderr).toBe("");
  });

  it("tolerates the daemon's configured leading args", async () => {
    const result = await runCli(["/tmp/argv.json", "--modes", "pipes", "describe"]);
    expect(result.code).toBe(0);
    expect(result.stdout.toString("utf8")).toBe(DESCRIBE);
  });

  it("does not read stdin: exits while stdin stays open", async () => {
    const child = spawn(process.execPath, [CLI_PATH, "describe"], { stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => out.push(c));
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error("describe waited for stdin"));
      }, 5000);
      child.on("close", (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    child.stdin.destroy();
    expect(code).toBe(0);
    expect(Buffer.concat(out).toString()).toBe(DESCRIBE);
  });

  it("accepts no flags", async () => {
    expectOneLineFailure(await runCli(["describe", "--workspace-id", "w"]), "Unknown flag --workspace-id for operation describe");
  });
});

describe("argv errors: one stderr line, exit 2, no stack trace", () => {
  const cases: [string, string[], string | RegExp][] = [
    ["unknown operation", ["frobnicate"], "Unknown operation: frobnicate"],
    [
      "unknown operation after leading args",
      ["/tmp/argv.json", "--modes", "pipes", "frob", "--workspace-id", "w"],
      /^Unknown operation: frob\n$/,
    ],
    ["no operation", [], "Missing operation; expected one of: describe, create, inspect"],
    ["unknown flag", ["inspect", "--workspace-id", "w", "--colour", "red"], "Unknown flag --colour for operation inspect"],
    ["repeated flag", ["inspect", "--workspace-id", "a", "--workspace-id", "b"], "Repeated flag --workspace-id"],
    ["missing value at the end", ["inspect", "--workspace-id"], "Missing value for flag --workspace-id"],
    ["missing value before a flag", ["signal", "--workspace-id", "--exec-id", "e"], "Missing value for flag --workspace-id"],
    ["--flag=value form", ["inspect", "--workspace-id=w"], "Flag --workspace-id must be given as two arguments: --workspace-id <value>"],
    ["positional argument", ["inspect", "w"], "Unexpected argument for inspect: w"],
    ["short flag", ["inspect", "-w", "x"], "Unexpected argument for inspect: -w"],
    ["missing required flag", ["inspect"], "--workspace-id is required"],
    ["missing one of several required flags", ["signal", "--workspace-id", "w", "--signal", "SIGKILL"], "--exec-id is required"],
  ];
  for (const [name, args, text] of cases) {
    it(name, async () => {
      expectOneLineFailure(await runCli(args, { stdin: lifecycleRequest() }), text);
    });
  }

  it("leading args before an unknown flag still parse the operation", async () => {
    const result = await runCli(["--modes", "pipes", "destroy", "--workspace-id", "w", "--force", "yes"]);
    expectOneLineFailure(result, "Unknown flag --force for operation destroy");
  });
});

describe("lifecycle request validation happens first, before any network use", () => {
  let server: Server;
  let port = 0;
  let connections = 0;
  beforeAll(async () => {
    server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const options = () => ({ host: "127.0.0.1", port, user: "nobody" });
  const inspect = (stdin: string) => runCli(["inspect", "--workspace-id", "w"], { stdin });
  const valid = () => JSON.parse(lifecycleRequest(options())) as Record<string, unknown>;

  it("protocolVersion 2", async () => {
    expectOneLineFailure(
      await inspect(JSON.stringify({ ...valid(), protocolVersion: 2 }) + "\n"),
      "unsupported protocol version 2; expected 1",
    );
  });

  it("an unknown key", async () => {
    expectOneLineFailure(
      await inspect(JSON.stringify({ ...valid(), root: "/private" }) + "\n"),
      'Invalid lifecycle request: Unrecognized key: "root"',
    );
  });

  it("a runtimeInstanceId that is not a SHA-256 identity", async () => {
    for (const id of ["not-hex", TEST_RUNTIME_INSTANCE_ID.toUpperCase(), TEST_RUNTIME_INSTANCE_ID + "0"]) {
      const result = await inspect(JSON.stringify({ ...valid(), runtimeInstanceId: id }) + "\n");
      expectOneLineFailure(result, /^Runtime instance id must be a SHA-256 identity\n$/);
    }
  });

  it("malformed JSON and empty stdin", async () => {
    expectOneLineFailure(await inspect("{nope}\n"), /^Invalid request JSON: /);
    expectOneLineFailure(await inspect(""), "Invalid request JSON: stdin was empty");
  });

  it("options nested 5,000 levels deep, and a request that is not valid UTF-8", async () => {
    const deep = JSON.stringify({ ...valid(), options: { ...options(), vendor: "@" } }).replace('"@"', "[".repeat(5000) + "]".repeat(5000));
    expectOneLineFailure(await inspect(deep + "\n"), "Invalid request JSON: nested deeper than 64 levels");
    // An invalid byte in `root` would otherwise be replaced by U+FFFD and name a new root.
    const [head, tail] = JSON.stringify({ ...valid(), options: { ...options(), root: "~/.paseo-audit@" } }).split("@");
    const bytes = Buffer.concat([Buffer.from(head!), Buffer.from([0xff]), Buffer.from(tail! + "\n")]);
    expectOneLineFailure(
      await runCli(["inspect", "--workspace-id", "w"], { stdin: bytes }),
      "Invalid request JSON: stdin is not valid UTF-8",
    );
    expect(connections).toBe(0);
  });

  it("create without input, and reconcile without workspaceIds", async () => {
    expectOneLineFailure(
      await runCli(["create", "--workspace-id", "w"], { stdin: lifecycleRequest(options()) }),
      "create input is required",
    );
    expectOneLineFailure(await runCli(["reconcile"], { stdin: lifecycleRequest(options()) }), /^reconcile needs workspaceIds/);
  });

  it("create whose input names another workspace", async () => {
    const input = {
      workspaceId: "other",
      project: { projectId: "p", source: { kind: "git" as const, url: "https://example.test/p.git", revision: "" } },
      placement: { kind: "existing" as const },
    };
    const result = await runCli(["create", "--workspace-id", "w"], { stdin: lifecycleRequest(options(), { input }) });
    expectOneLineFailure(result, 'create input.workspaceId "other" does not match --workspace-id "w"');
  });

  it("made no connection to the host named in options", () => {
    expect(connections).toBe(0);
  });
});
