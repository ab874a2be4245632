// Random hex for tokens and temporary names without loading node:crypto, whose module graph costs
// a runtime process more than all it needs of it (an exec draws 16 bytes before it connects). The
// kernel's generator is read directly; without a /dev/urandom character device, the Web Crypto
// API (as costly to load as node:crypto) draws them.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";

function fromDevice(buf: Buffer): boolean {
  let fd: number;
  try {
    fd = openSync("/dev/urandom", "r");
  } catch {
    return false;
  }
  try {
    if (!fstatSync(fd).isCharacterDevice()) return false;
    for (let off = 0; off < buf.length;) {
      const n = readSync(fd, buf, off, buf.length - off, null);
      if (n <= 0) return false;
      off += n;
    }
    return true;
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

/** `bytes` cryptographically random bytes as lowercase hex. */
export function randomHex(bytes: number): string {
  const buf = Buffer.alloc(bytes);
  if (!fromDevice(buf)) globalThis.crypto.getRandomValues(buf);
  return buf.toString("hex");
}
