// The real host daemon against a hostile client on its own socket (what a compromised broker, or
// any process of the login user, can do): HELLO with keepaliveMs 1e10, then 26 MiB of PINGs, never
// reading a PONG. The daemon owes such a peer one PONG, not one per PING (and would stop reading a
// channel whose unread answers pile up), so its memory stays flat (it grew from 50 to 594 MiB), its
// pings keep their clamped interval, and it keeps serving every other operation.
import { connect } from "node:net";
import { once } from "node:events";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { agentBundle } from "../../src/transport/bootstrap.js";
import { MUX_VERSION, MuxFrame, encodeMuxFrame } from "../../src/shared/mux.js";
import { ExecWorkspace, flood, rssOf } from "../support/exec.js";
import { daemonsOf, finish } from "../support/host-daemon.js";
import { needs, unless } from "../support/needs.js";

const cleanups = suite();

const MiB = 1024 * 1024;

describe(
  "a hostile client of the host daemon",
  unless(needs.localHost("connects to the host daemon's Unix socket and reads its RSS directly")),
  () => {
    it("HELLO with keepaliveMs 1e10 and 26 MiB of PINGs, never reading: the daemon's RSS stays within 64 MiB of where it was, and it serves on", async () => {
      const ws = new ExecWorkspace("hostile-peer");
      cleanups.push(() => finish(ws));
      await ws.create();
      const [daemon] = daemonsOf(ws.configuredRoot);
      expect(daemon).toBeDefined();
      const before = rssOf(daemon!.pid);

      const sock = connect(join(ws.configuredRoot, "run", `d-${agentBundle().hash}.sock`));
      cleanups.push(() => void sock.destroy());
      await once(sock, "connect");
      // Never read: whatever the daemon answers stays with it (or in the socket's buffers).
      sock.pause();
      const hello = { v: MUX_VERSION, role: "client", build: "hostile", keepaliveMs: 1e10 };
      sock.write(encodeMuxFrame(MuxFrame.Hello, 0, Buffer.from(JSON.stringify(hello))));
      const ping = encodeMuxFrame(MuxFrame.Ping, 0, Buffer.alloc(0));
      const pings = Buffer.concat(Array.from({ length: 7281 }, () => ping));
      const r = await flood(sock, daemon!.pid, 26 * MiB, pings, 3000);
      console.log(
        `daemon RSS ${(before / MiB).toFixed(0)} -> max ${(r.maxRss / MiB).toFixed(0)} MiB; it took ${(r.written / MiB).toFixed(1)} MiB of PINGs`,
      );
      expect(r.maxRss - before).toBeLessThan(64 * MiB);
      // The same daemon answers everyone else meanwhile.
      expect(await ws.processes()).toEqual([]);
      expect(daemonsOf(ws.configuredRoot).map((d) => d.pid)).toEqual([daemon!.pid]);
    }, 120_000);
  },
);
