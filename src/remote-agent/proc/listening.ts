// Which TCP ports are listened on, and by which process (Linux): the kernel lists listening sockets
// with their owner uid and inode in /proc/net/tcp{,6} (for the reader's network namespace, which is
// the daemon's and its workloads'), and a process holds a socket as an fd whose link reads
// `socket:[<inode>]`. Only sockets a local `localhost:P` reaches count: bound to a loopback or an
// any address; a server bound to one external interface address is not one sshd's `localhost`
// connection would reach.
import { openSync, readSync, readdirSync, readlinkSync } from "node:fs";

export type ListenAddress = "127.0.0.1" | "0.0.0.0" | "::1" | "::";

export interface Listener {
  inode: string;
  port: number;
  address: ListenAddress;
  uid: number;
}

/** TCP_LISTEN in the `st` column. */
const LISTEN = "0A";

const V4: Record<string, ListenAddress> = { "0100007F": "127.0.0.1", "00000000": "0.0.0.0" };
const V6: Record<string, ListenAddress> = {
  "00000000000000000000000001000000": "::1",
  "00000000000000000000000000000000": "::",
  // ::ffff:127.0.0.1, ::ffff:0.0.0.0 (a dual-stack socket bound to a v4 address)
  "0000000000000000FFFF00000100007F": "127.0.0.1",
  "0000000000000000FFFF000000000000": "0.0.0.0",
};

/** The listening sockets of one /proc/net/tcp or tcp6 text that a connection to localhost reaches. */
export function parseProcNetTcp(text: string, v6: boolean): Listener[] {
  const out: Listener[] = [];
  const table = v6 ? V6 : V4;
  const lines = text.split("\n");
  for (let i = 1; i < lines.length; i++) {
    const f = lines[i]!.trim().split(/\s+/);
    if (f.length < 10 || f[3] !== LISTEN) continue;
    const local = f[1]!;
    const colon = local.indexOf(":");
    const address = table[local.slice(0, colon).toUpperCase()];
    if (!address) continue;
    const port = parseInt(local.slice(colon + 1), 16);
    const uid = Number(f[7]);
    if (!Number.isInteger(port) || port <= 0 || !Number.isInteger(uid)) continue;
    out.push({ inode: f[9]!, port, address, uid });
  }
  return out;
}

/** Descriptors kept open: a read at offset 0 regenerates the table, and open+close per tick doubled its cost. */
const tables = new Map<string, number | null>();
let chunk = Buffer.allocUnsafe(64 * 1024);

function read(path: string): string {
  let fd = tables.get(path);
  if (fd === undefined) {
    try {
      fd = openSync(path, "r");
    } catch {
      fd = null; // no IPv6 in this kernel, or not Linux
    }
    tables.set(path, fd);
  }
  if (fd === null) return "";
  let len = 0;
  for (;;) {
    if (len === chunk.length) {
      const bigger = Buffer.allocUnsafe(chunk.length * 2);
      chunk.copy(bigger);
      chunk = bigger;
    }
    // Until a read gives nothing: the kernel hands out a table a page or so per read, so a short
    // read is not the end (20 listeners and a few connections already span two).
    const n = readSync(fd, chunk, len, chunk.length - len, len);
    if (n === 0) break;
    len += n;
  }
  return chunk.toString("latin1", 0, len);
}

/** Listening sockets of `uid` that localhost reaches (another user's are never looked at). */
export function listeners(uid: number): Listener[] {
  return [...parseProcNetTcp(read("/proc/net/tcp"), false), ...parseProcNetTcp(read("/proc/net/tcp6"), true)].filter((l) => l.uid === uid);
}

/** The socket inodes process `pid` holds (empty when it is gone or not ours to look at). */
export function socketInodes(pid: number): Set<string> {
  const out = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return out;
  }
  for (const fd of fds) {
    try {
      const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (link.startsWith("socket:[")) out.add(link.slice(8, -1));
    } catch {
      // closed meanwhile
    }
  }
  return out;
}
