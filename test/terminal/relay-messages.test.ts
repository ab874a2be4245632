// The terminal relays are not TypeScript, so their message names are held here to the one
// declaration (src/remote-agent/terminal/relay-messages.ts): each relay handles every control
// message, sends only declared status messages, and together they send every one of them; the
// sshd-pty attach process answers with the same names.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RELAY_MESSAGE_TYPES, RelayControl, RelayStatus } from "../../src/remote-agent/terminal/relay-messages.js";
import { isAttachLine } from "../../src/remote-agent/exec/attach-lines.js";

const dir = join(import.meta.dirname, "../../src/remote-agent/terminal");
const source = (name: string) => readFileSync(join(dir, name), "utf8");
const names = (text: string, re: RegExp) => [...new Set([...text.matchAll(re)].map((m) => m[1]!))].sort();
const sorted = (xs: readonly string[]) => [...xs].sort();

const programs = {
  "relay.py": {
    sent: names(source("relay.py"), /send\(\s*\{"type":\s*"([^"]+)"/g),
    handled: names(source("relay.py"), /(?:kind ==|get\("type"\) !=) "([^"]+)"/g),
  },
  "script-child.cjs": {
    sent: names(source("script-child.cjs"), /\{\s*type:\s*"([^"]+)"/g),
    handled: names(source("script-child.cjs"), /msg\.type === "([^"]+)"/g),
  },
};

describe("terminal relay messages", () => {
  for (const [name, p] of Object.entries(programs)) {
    it(`${name} handles every control message and sends only declared status messages`, () => {
      expect(p.handled).toEqual(sorted(RELAY_MESSAGE_TYPES.control));
      expect(p.sent.length).toBeGreaterThan(2);
      for (const t of p.sent) expect(RELAY_MESSAGE_TYPES.status).toContain(t);
    });
  }

  it("every declared status message is sent by a relay", () => {
    const sent = new Set([...programs["relay.py"].sent, ...programs["script-child.cjs"].sent]);
    expect(sorted([...sent])).toEqual(sorted(RELAY_MESSAGE_TYPES.status));
  });

  it("the driver takes the declared shapes and nothing else", () => {
    expect(RelayStatus({ type: "resized", id: 3, ok: true })).toBe(true);
    expect(RelayStatus({ type: "size", id: 3, ok: true })).toBe(false);
    expect(RelayStatus({ type: "spawned", pid: 10, pgid: 10, sid: 10, startTime: "" })).toBe(true);
    expect(RelayStatus({ type: "exit", code: null, signal: "SIGKILL" })).toBe(true);
    expect(RelayControl({ type: "resize", id: 1, rows: 24, cols: 80 })).toBe(true);
    expect(RelayControl({ type: "signal", signal: "SIGINT" })).toBe(true);
  });

  it("the sshd-pty attach process answers a size check with the relay's name for it", () => {
    expect(isAttachLine({ type: "resized", id: 1, ok: true })).toBe(true);
    expect(isAttachLine({ type: "size", id: 1, ok: true })).toBe(false);
  });
});
