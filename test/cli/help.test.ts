// `--help` everywhere: the executable, `help <op>` and `<op> --help` print usage, flags and an
// example on stdout and exit 0; a `--help` in a flag's value position stays a strict-parsing error.
import { describe, expect, it } from "vitest";
import { OPERATIONS } from "../../src/cli/ops/registry.js";
import { runCli } from "../support/run-cli.js";

const names = Object.keys(OPERATIONS);

describe("--help", () => {
  it.each([[["--help"]], [["-h"]], [["help"]]])("paseo-ssh-runtime %j lists every operation", async (args) => {
    const r = await runCli(args);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    const out = r.stdout.toString();
    expect(out).toMatch(/^Usage: paseo-ssh-runtime <operation>/);
    for (const name of names) expect(out).toMatch(new RegExp(`^  ${name} +\\S`, "m"));
    expect(out).toContain("Example:");
  });

  it.each(names)("%s: `%s --help` and `help %s` print its usage, flags and an example", async (name) => {
    for (const args of [
      [name, "--help"],
      ["help", name],
    ]) {
      const r = await runCli(args);
      expect(r.code, args.join(" ")).toBe(0);
      expect(r.stderr).toBe("");
      const out = r.stdout.toString();
      expect(out.startsWith(`Usage: paseo-ssh-runtime ${name}`)).toBe(true);
      expect(out).toMatch(/\nExample:\n {2}.*paseo-ssh-runtime .*\n$/);
      if (name !== "describe" && name !== "reconcile" && name !== "work-notice" && name !== "git-credential")
        expect(out).toContain("Flags:\n  --");
    }
  });

  it("after the daemon's leading args and after real flags, --help still answers", async () => {
    const r = await runCli(["/tmp/argv.json", "signal", "--workspace-id", "w", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout.toString()).toContain("--signal <SIG>");
  });

  it("a --help standing where a flag value belongs is not help: strict parsing answers", async () => {
    const r = await runCli(["inspect", "--workspace-id", "--help"]);
    expect(r.code).toBe(2);
    expect(r.stdout.length).toBe(0);
    expect(r.stderr).toBe("Missing value for flag --workspace-id\n");
  });
});
