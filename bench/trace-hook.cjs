// Profiling preload for the bench (`NODE_OPTIONS=--require bench/trace-hook.cjs`, with
// PASEO_BENCH_TRACE_DIR set): records, with wall-clock timestamps comparable across processes on
// this machine, when a runtime process finished node's start-up, every child process it starts,
// and every socket connect, connection, read and write (fd pipes included). It changes nothing in
// the runtime and knows nothing of its protocol, so it keeps working while the exec path is
// rewritten; bench/exec-profile.mjs turns the records into phases. Without PASEO_BENCH_TRACE_DIR
// this file does nothing. (A broker the process starts does not inherit the variables.)
"use strict";
const dir = process.env.PASEO_BENCH_TRACE_DIR;

if (dir) {
  const { performance } = require("node:perf_hooks");
  const { appendFileSync } = require("node:fs");
  const { join } = require("node:path");
  const net = require("node:net");
  const now = () => performance.timeOrigin + performance.now();
  const file = join(dir, `cli-${process.pid}.jsonl`);
  let lines = [JSON.stringify({ ev: "preload", t: now(), origin: performance.timeOrigin, argv: process.argv.slice(2, 3) })];
  const flush = () => {
    if (lines.length === 0) return;
    try {
      appendFileSync(file, lines.join("\n") + "\n");
    } catch {
      // A profile is optional; never disturb the process.
    }
    lines = [];
  };
  // A long exec: write out what it recorded every so often, not only at exit.
  setInterval(flush, 200).unref();
  process.on("exit", () => {
    lines.push(JSON.stringify({ ev: "exit", t: now() }));
    flush();
  });

  const label = (sock) => {
    if (sock.__benchLabel) return sock.__benchLabel;
    const fd = sock._handle && typeof sock._handle.fd === "number" ? sock._handle.fd : -1;
    return fd >= 0 && fd <= 4 ? `fd${fd}` : sock.server ? "accepted" : "socket";
  };
  const record = (ev, sock, extra) => lines.push(JSON.stringify({ ev, s: label(sock), t: now(), ...extra }));
  // What a chunk on fd4 (or a JSON-lines socket) announces, for the profile's landmarks.
  const kind = (chunk) => {
    if (typeof chunk !== "string" && !Buffer.isBuffer(chunk)) return undefined;
    const m = /"type":"([a-z-]+)"/.exec(String(chunk).slice(0, 200));
    return m ? m[1] : undefined;
  };
  const size = (chunk) => (typeof chunk === "string" ? Buffer.byteLength(chunk) : chunk && chunk.length) || 0;

  // Child processes (e.g. `ssh -G` resolving the host's configuration) and how long they ran.
  const cp = require("node:child_process");
  const spawnChild = cp.ChildProcess.prototype.spawn;
  cp.ChildProcess.prototype.spawn = function (options) {
    const what = [options && options.file, ...((options && options.args) || []).slice(1, 3)].join(" ").slice(0, 80);
    const result = spawnChild.call(this, options);
    lines.push(JSON.stringify({ ev: "spawn", pid: this.pid, what, t: now() }));
    this.once("exit", () => lines.push(JSON.stringify({ ev: "child-exit", pid: this.pid, what, t: now() })));
    return result;
  };

  const proto = net.Socket.prototype;
  const connect = proto.connect;
  proto.connect = function (...args) {
    try {
      const a = Array.isArray(args[0]) ? args[0][0] : args[0];
      const target =
        typeof a === "string" ? `unix:${a}` : typeof a === "number" ? `tcp:${a}` : a && a.path ? `unix:${a.path}` : `tcp:${a && a.port}`;
      this.__benchLabel = target;
      record("connect", this);
    } catch {
      // labelled "socket" then
    }
    return connect.apply(this, args);
  };
  const write = proto.write;
  proto.write = function (chunk, ...rest) {
    record("write", this, { n: size(chunk), k: kind(chunk) });
    return write.call(this, chunk, ...rest);
  };
  const emit = proto.emit;
  proto.emit = function (ev, ...args) {
    if (ev === "data") record("data", this, { n: size(args[0]), k: kind(args[0]) });
    else if (ev === "connect" || ev === "end" || ev === "close") record(ev, this);
    return emit.call(this, ev, ...args);
  };
}
