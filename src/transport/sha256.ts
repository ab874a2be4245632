// SHA-256 for the few short names a runtime process derives before it connects (the broker socket
// of a host configuration, the ssh -G cache entry). node:crypto computes the same digest, but
// loading its module graph cost an exec more than everything it hashes; @noble/hashes is a small,
// audited pure-JS implementation that loads in a fraction of that. test/transport/sha256.test.ts
// holds it to node:crypto's answers.
import { sha256 } from "@noble/hashes/sha2";
import { bytesToHex } from "@noble/hashes/utils";

/** The SHA-256 digest of `data` (a string is hashed as its UTF-8 bytes), as 64 lowercase hex digits. */
export function sha256Hex(data: string | Uint8Array): string {
  return bytesToHex(sha256(typeof data === "string" ? Buffer.from(data, "utf8") : data));
}
