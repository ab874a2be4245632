// The wrapper's exit status on the Paseo side, which may be a laptop (macOS): signal names come
// from the Linux host, numbers from the local OS, and a name the local OS lacks must still give a
// status rather than a crash or a raise of an unknown signal. Pure: signal tables are passed in.
import { describe, expect, it } from "vitest";
import { mirrorExit } from "../../src/exec/wrapper-signals.js";

/** What os.constants.signals holds on macOS, for the names these cases use. */
const DARWIN = { SIGHUP: 1, SIGINT: 2, SIGUSR1: 30, SIGIO: 23, SIGWINCH: 28, SIGCHLD: 20 };

describe("mirrorExit", () => {
  it("exits with the workload's code, or 1 when it has none", () => {
    expect(mirrorExit(7, null, DARWIN)).toBe(7);
    expect(mirrorExit(null, null, DARWIN)).toBe(1);
  });

  it("maps a non-terminating signal to 128 + this OS's number for it", () => {
    expect(mirrorExit(null, "SIGWINCH", DARWIN)).toBe(128 + 28);
    expect(mirrorExit(null, "SIGCHLD", { SIGCHLD: 17 })).toBe(128 + 17);
  });

  it("a Linux signal macOS lacks (SIGPWR, SIGSTKFLT, SIGPOLL) is not raised and maps to 128 + its Linux number", () => {
    expect(mirrorExit(null, "SIGPWR", DARWIN)).toBe(128 + 30);
    expect(mirrorExit(null, "SIGSTKFLT", DARWIN)).toBe(128 + 16);
    expect(mirrorExit(null, "SIGPOLL", DARWIN)).toBe(128 + 29);
    expect(mirrorExit(null, "SIGNOSUCH", DARWIN)).toBe(1);
  });
});
