// Reading /proc/net/tcp{,6} (pure logic): which listening sockets a connection to the host's
// localhost reaches, with their owner uid and inode; the rest (connected sockets, external
// addresses) is not a forwardable server.
import { describe, expect, it } from "vitest";
import { parseProcNetTcp } from "../../src/remote-agent/proc/listening.js";
import { namedPorts } from "../../src/remote-agent/exec/named-ports.js";

const HEAD = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
const row = (local: string, st: string, uid: number, inode: number) =>
  `   0: ${local} 00000000:0000 ${st} 00000000:00000000 00:00000000 00000000  ${uid}        0 ${inode} 1 0000000000000000 100 0 0 10 0\n`;

describe("parseProcNetTcp", () => {
  it("IPv4: listeners on 127.0.0.1 and 0.0.0.0, not on another address or not listening", () => {
    const text =
      HEAD +
      row("0100007F:0BB8", "0A", 1000, 11) + // 127.0.0.1:3000
      row("00000000:1435", "0A", 1001, 12) + // 0.0.0.0:5173, another user
      row("0200000A:0050", "0A", 1000, 13) + // 10.0.0.2:80
      row("0100007F:0BB9", "01", 1000, 14); // established
    expect(parseProcNetTcp(text, false)).toEqual([
      { inode: "11", port: 3000, address: "127.0.0.1", uid: 1000 },
      { inode: "12", port: 5173, address: "0.0.0.0", uid: 1001 },
    ]);
  });

  it("IPv6: ::1, ::, and v4-mapped loopback", () => {
    const text =
      HEAD +
      row("00000000000000000000000001000000:1F90", "0A", 1000, 21) + // [::1]:8080
      row("00000000000000000000000000000000:1F91", "0A", 1000, 22) + // [::]:8081
      row("0000000000000000FFFF00000100007F:1F92", "0A", 1000, 23) + // [::ffff:127.0.0.1]:8082
      row("B80D0120000000000000000001000000:1F93", "0A", 1000, 24); // 2001:db8::1
    expect(parseProcNetTcp(text, true).map((l) => [l.address, l.port, l.inode])).toEqual([
      ["::1", 8080, "21"],
      ["::", 8081, "22"],
      ["127.0.0.1", 8082, "23"],
    ]);
  });
});

describe("namedPorts", () => {
  it("takes the ports Paseo names (PASEO_PORT, PASEO_SERVICE_<NAME>_PORT, PASEO_WORKTREE_PORT) and ignores the rest", () => {
    const env = {
      PASEO_PORT: "5173",
      PASEO_SERVICE_API_PORT: "8080",
      PASEO_SERVICE_WEB_2_PORT: "5173",
      PASEO_WORKTREE_PORT: "3000",
      PASEO_SERVICE__PORT: "1",
      PASEO_PORTS: "4000",
      MY_PORT: "4001",
      PASEO_SERVICE_X_PORT: "70000",
      PASEO_SERVICE_Y_PORT: "0",
      PASEO_SERVICE_Z_PORT: " 80",
      PASEO_SERVICE_lower_PORT: "81",
    };
    expect(namedPorts(env).sort((a, b) => a - b)).toEqual([3000, 5173, 8080]);
    expect(namedPorts({})).toEqual([]);
  });
});
